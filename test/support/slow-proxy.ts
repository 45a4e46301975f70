// A hostile network in front of a real server (the PDS or the PLC directory): per request, the answer can be
// delayed, have its body trickled a few bytes at a time (headers first, so only a body deadline can stop it),
// or be rewritten (e.g. a DID document whose PDS endpoint is another proxy).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SlowAnswer {
  /** Wait this long before sending anything. */
  delayMs?: number;
  /** Send the headers at once, then this many bytes per second of body (the whole answer is never hurried). */
  trickleBytesPerSecond?: number;
  /** Replace the upstream body (after reading it). */
  rewrite?: (body: Buffer) => Buffer;
  /**
   * Send `200` and the headers before asking upstream (the body follows, trickled): the client reaches the body
   * stage at once however slow upstream is under load.
   */
  eagerHeaders?: boolean;
}

export interface SlowProxy {
  url: string;
  /** Requests seen (path + query) and how many bytes of body each one was sent before it ended. */
  requests: { path: string; headersSent: boolean; sent: number; closedEarly: boolean }[];
  close(): Promise<void>;
}

export async function startSlowProxy(target: string, plan: (path: string) => SlowAnswer | null): Promise<SlowProxy> {
  const requests: SlowProxy['requests'] = [];
  const timers = new Set<NodeJS.Timeout>();
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '/';
    const seen = { path, headersSent: false, sent: 0, closedEarly: false };
    requests.push(seen);
    const how = plan(path) ?? {};
    if (how.eagerHeaders) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.flushHeaders();
      seen.headersSent = true;
    }
    void (async () => {
      try {
        const up = await fetch(new URL(path, target), { headers: { accept: String(req.headers.accept ?? '*/*') } });
        let body: Buffer = Buffer.from(await up.arrayBuffer());
        if (how.rewrite) body = how.rewrite(body);
        const headers: Record<string, string> = { 'content-length': String(body.length) };
        const type = up.headers.get('content-type');
        if (type) headers['content-type'] = type;
        if (how.delayMs) await new Promise((r) => timers.add(setTimeout(r, how.delayMs)));
        if (res.destroyed) return;
        if (!res.headersSent) {
          res.writeHead(up.status, headers);
          res.flushHeaders();
          seen.headersSent = true;
        }
        if (!how.trickleBytesPerSecond) {
          seen.sent = body.length;
          res.end(body);
          return;
        }
        // 1 B/s is one byte a second; faster rates go out in ten slices a second.
        const bps = how.trickleBytesPerSecond;
        const per = bps <= 10 ? 1 : Math.round(bps / 10);
        const every = bps <= 10 ? Math.round(1000 / bps) : 100;
        let off = 0;
        res.on('close', () => {
          if (off < body.length) seen.closedEarly = true;
        });
        // The first slice goes with the headers: from then on only a body deadline can end the read.
        res.write(body.subarray(0, per));
        off = per;
        seen.sent = off;
        const tick = setInterval(() => {
          if (res.destroyed || off >= body.length) {
            clearInterval(tick);
            timers.delete(tick);
            if (!res.destroyed) res.end();
            return;
          }
          res.write(body.subarray(off, off + per));
          off += per;
          seen.sent = off;
        }, every);
        timers.add(tick);
      } catch (err) {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'ProxyError', message: (err as Error).message }));
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Rewrites a DID document's #atproto_pds endpoint (what a PLC directory in front of a slow PDS answers). */
export const pointPdsAt =
  (pdsUrl: string) =>
  (body: Buffer): Buffer => {
    const doc = JSON.parse(body.toString('utf8')) as { service?: { id: string; serviceEndpoint: string }[] };
    for (const s of doc.service ?? [])
      if (s.id === '#atproto_pds' || s.id.endsWith('#atproto_pds')) s.serviceEndpoint = pdsUrl;
    return Buffer.from(JSON.stringify(doc));
  };
