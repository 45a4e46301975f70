// Prometheus' /metrics: on the API listener behind the bearer token (Prometheus sends one with
// `authorization: { credentials_file: … }`), or on a listener of its own (`runlog serve --metrics-listen`) that
// serves nothing else, for scrapers that cannot hold a token or live on another machine. That one needs no
// token because it can only be read: aggregated counters whose labels carry no ids, no control at all.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { RunlogMetrics } from '../supervisor/observability/metrics.ts';
import { closeServer, listenOn } from './bind.ts';
import { HttpError, sendError, SECURITY_HEADERS } from './http.ts';

export async function sendMetrics(
  metrics: RunlogMetrics | null,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD')
    throw new HttpError('METHOD_NOT_ALLOWED', `${req.method} /metrics: use GET`, { allow: ['GET', 'HEAD'] });
  if (!metrics) throw new HttpError('NO_METRICS', 'this runlog keeps no metrics (not supervising, or metrics: false)');
  const body = await metrics.text();
  res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': metrics.contentType, 'cache-control': 'no-store' });
  res.end(req.method === 'HEAD' ? undefined : body);
}

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

/** A listener serving only GET /metrics. */
export async function startMetricsServer(metrics: RunlogMetrics, host: string, port: number): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const answer =
      path === '/metrics'
        ? sendMetrics(metrics, req, res)
        : Promise.reject(new HttpError('NOT_FOUND', 'only /metrics is served here'));
    answer.catch((err: unknown) =>
      sendError(res, err, err instanceof HttpError && err.status === 405 ? { allow: 'GET, HEAD' } : {}),
    );
  });
  server.headersTimeout = 10_000;
  const { origin } = await listenOn(server, host, port);
  return { url: `${origin}/metrics`, close: () => closeServer(server) };
}
