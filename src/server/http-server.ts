// `startServer`: the supervisor's HTTP face on loopback. Every /api/* request needs
// `Authorization: Bearer <token>`; only the inspector's static page shell is served without it.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Runlog } from '../supervisor/runlog.ts';
import { runlogInternals } from '../supervisor/runlog-internals.ts';
import { RunlogError, UsageError } from '../domain/errors.ts';
import { handleApi } from './api.ts';
import { closeServer, listenOn } from './bind.ts';
import { sendMetrics } from './metrics-server.ts';
import { HttpError, sendError, SECURITY_HEADERS } from './http.ts';
import { isLoopbackAddress, isLoopbackHostHeader } from './listen.ts';
import { createSseHub, type SseOptions } from './sse.ts';
import { loadAssets } from './static-assets.ts';
import { bearerToken, tokenMatches } from './token.ts';

export interface StartServerOptions {
  runlog: Runlog;
  /** A loopback address (127.0.0.0/8 or ::1); anything else is refused. */
  host: string;
  /** 0 = any free port. */
  port: number;
  token: string;
  log?: (msg: string) => void;
  /** How often SSE tails look for commits by other processes (ms). */
  pollMs?: number;
  /** Event-stream limits: page size, client cap, how long a backed-up client is kept (sse.ts). */
  sse?: Omit<SseOptions, 'pollMs'>;
}

export interface RunningServer {
  /** http://<host>:<port>/ */
  url: string;
  host: string;
  port: number;
  /** The inspector's address with the token in the URL fragment (never sent to the server). */
  inspectorUrl: string;
  close(): Promise<void>;
}

/** The request path without its query (which may hold nothing secret, but logs stay short). */
const pathOf = (req: IncomingMessage): string => (req.url ?? '').split('?')[0]!;

export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const { runlog, host, port, token } = options;
  if (!isLoopbackAddress(host))
    throw new UsageError(`refusing to listen on '${host}': only loopback addresses (127.0.0.0/8, ::1) are allowed`);
  if (!token) throw new UsageError('startServer needs a token');
  const assets = loadAssets();
  const { store, metrics } = runlogInternals(runlog);
  const sse = createSseHub(store, { ...options.sse, pollMs: options.pollMs ?? 200 });
  const ctx = { runlog, store, sse, startedAt: new Date().toISOString() };
  const log = options.log ?? (() => undefined);

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!isLoopbackHostHeader(req.headers.host)) {
      throw new HttpError(
        'FORBIDDEN_HOST',
        `Host '${req.headers.host ?? ''}' is not a loopback name; the supervisor answers only to 127.0.0.1, [::1] or localhost`,
      );
    }
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const isApi = url.pathname === '/api' || url.pathname.startsWith('/api/');
    if (isApi || url.pathname === '/metrics') {
      const given = bearerToken(req.headers.authorization);
      if (given === null || !tokenMatches(token, given)) {
        throw new HttpError(
          'UNAUTHORIZED',
          given === null ? 'missing Authorization: Bearer <token> (the token is in $RUNLOG_HOME/token)' : 'wrong token',
        );
      }
      if (isApi) await handleApi(ctx, req, res, url);
      else await sendMetrics(metrics, req, res);
      return;
    }
    const asset = req.method === 'GET' || req.method === 'HEAD' ? assets.get(url.pathname) : undefined;
    if (!asset) {
      res.writeHead(404, { ...SECURITY_HEADERS, 'content-type': 'text/plain; charset=utf-8' });
      res.end('not found\n');
      return;
    }
    res.writeHead(200, asset.headers);
    res.end(req.method === 'HEAD' ? undefined : asset.body);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!(err instanceof RunlogError))
        log(`${req.method} ${pathOf(req)}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      const headers: Record<string, string> = {};
      if (err instanceof HttpError) {
        if (err.status === 401) headers['www-authenticate'] = 'Bearer realm="runlog"';
        if (err.status === 405 && Array.isArray(err.details?.allow))
          headers.allow = (err.details.allow as string[]).join(', ');
        if (err.status === 413) headers.connection = 'close';
      }
      sendError(res, err, headers);
    });
  });
  server.headersTimeout = 10_000;
  server.keepAliveTimeout = 5_000;

  const bound = await listenOn(server, host, port);
  const url = `${bound.origin}/`;
  let closing: Promise<void> | undefined;
  return {
    url,
    host: bound.host,
    port: bound.port,
    inspectorUrl: `${url}#token=${token}`,
    close() {
      if (!closing) {
        sse.closeAll();
        // Requests still in flight (a long execute) are cut after 2 s: the supervisor is going away.
        closing = closeServer(server, 2000);
      }
      return closing;
    },
  };
}
