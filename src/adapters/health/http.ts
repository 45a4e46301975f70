import { request } from 'node:http';

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * One plain HTTP/1.1 request without keep-alive (agent: false), so a health poll or a lifecycle call never
 * leaves a pooled socket behind. Bodies over `maxBody` bytes are cut (health and hook answers are small).
 */
export function httpRequest(opts: {
  host: string;
  port: number;
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  timeoutMs: number;
  maxBody?: number;
}): Promise<HttpAnswer> {
  const maxBody = opts.maxBody ?? 1 << 20;
  const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: opts.host,
        port: opts.port,
        method: opts.method,
        path: opts.path,
        agent: false,
        timeout: opts.timeoutMs,
        headers: payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          if (size < maxBody) chunks.push(c);
          size += c.length;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8').slice(0, maxBody),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${opts.timeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}
