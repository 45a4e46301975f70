// The proxy's control API, for the supervisor alone: register and remove grants, read reports, check health.
//
//   PUT    /grants/:key        { address, grant }  → 201 { key, address, proxyPort, dnsPort }
//   DELETE /grants/:key                            → 200 { key, address, usage }
//   GET    /grants                                 → 200 { grants: [{ key, address, usage }] }
//   GET    /reports?after=<seq>&wait=<ms>&limit=<n>&key=<key>
//                                                  → 200 { reports, next, lost }
//   GET    /health                                 → 200 { ok: true } (no token needed; it says nothing else)
//
// Every other route needs `Authorization: Bearer <token>`, compared in constant time (both sides hashed first, so
// the length of the token leaks nothing either). Errors are { error: { code, message, issues? } } with a code of
// the one table. Bodies are JSON of at most 256 KiB.
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { parseGrant } from '../../../domain/at-run/egress-grant.ts';
import type { EgressControlCode } from '../../../domain/at-run/egress-codes.ts';
import { ControlError, type GrantRegistry } from './grant-registry.ts';
import type { ReportLog } from './reports.ts';

const MAX_BODY = 256 * 1024;
const MAX_WAIT_MS = 30_000;
const MAX_PAGE = 1000;
export const KEY_RE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

const STATUS: Record<EgressControlCode, number> = {
  EGRESS_GRANT_INVALID: 400,
  EGRESS_GRANT_EXISTS: 409,
  EGRESS_GRANT_UNKNOWN: 404,
  EGRESS_LISTEN_FAILED: 503,
  UNAUTHORIZED: 401,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  PAYLOAD_TOO_LARGE: 413,
  INVALID_JSON: 400,
  INTERNAL: 500,
};

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/** Whether the request carries the token, compared in constant time. */
export function authorized(header: string | undefined, token: string): boolean {
  const m = /^Bearer (.+)$/.exec(header ?? '');
  return timingSafeEqual(digest(m?.[1] ?? ''), digest(token)) && m !== null;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, code: EgressControlCode, message: string, issues?: string[]): void {
  send(res, STATUS[code], { error: { code, message, ...(issues ? { issues } : {}) } });
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new ControlError('PAYLOAD_TOO_LARGE', `the body is over ${MAX_BODY} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    throw new ControlError('INVALID_JSON', 'the body is not JSON');
  }
}

const intParam = (v: string | null, fallback: number, min: number, max: number): number => {
  const n = v === null || !/^[0-9]{1,16}$/.test(v) ? fallback : Number(v);
  return Math.min(Math.max(n, min), max);
};

async function putGrant(registry: GrantRegistry, key: string, req: IncomingMessage, res: ServerResponse) {
  const body = await readJson(req);
  const isObject = typeof body === 'object' && body !== null && !Array.isArray(body);
  const { address, grant } = (isObject ? body : {}) as { address?: unknown; grant?: unknown };
  if (typeof address !== 'string') throw new ControlError('EGRESS_GRANT_INVALID', 'address must be an IP address');
  const parsed = parseGrant(grant);
  if ('issues' in parsed) return sendError(res, 'EGRESS_GRANT_INVALID', 'the grant is not valid', parsed.issues);
  send(res, 201, await registry.put(key, address, parsed.grant));
}

async function route(
  opts: { registry: GrantRegistry; reports: ReportLog; token: string },
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://control');
  if (url.pathname === '/health') {
    if (req.method !== 'GET') return sendError(res, 'METHOD_NOT_ALLOWED', 'GET only');
    return send(res, 200, { ok: true });
  }
  if (!authorized(req.headers.authorization, opts.token))
    return sendError(res, 'UNAUTHORIZED', 'a bearer token is needed');
  const grant = /^\/grants\/([^/]+)$/.exec(url.pathname);
  if (grant) {
    const key = /%/.test(grant[1] as string) ? '' : (grant[1] as string);
    if (!KEY_RE.test(key)) throw new ControlError('EGRESS_GRANT_INVALID', `${JSON.stringify(key)} is not a grant key`);
    if (req.method === 'PUT') return putGrant(opts.registry, key, req, res);
    if (req.method === 'DELETE') return send(res, 200, await opts.registry.remove(key));
    return sendError(res, 'METHOD_NOT_ALLOWED', 'PUT or DELETE only');
  }
  if (url.pathname === '/grants') {
    if (req.method !== 'GET') return sendError(res, 'METHOD_NOT_ALLOWED', 'GET only');
    return send(res, 200, { grants: opts.registry.list() });
  }
  if (url.pathname === '/reports') {
    if (req.method !== 'GET') return sendError(res, 'METHOD_NOT_ALLOWED', 'GET only');
    const key = url.searchParams.get('key');
    const page = await opts.reports.read({
      after: intParam(url.searchParams.get('after'), 0, 0, Number.MAX_SAFE_INTEGER),
      waitMs: intParam(url.searchParams.get('wait'), 0, 0, MAX_WAIT_MS),
      limit: intParam(url.searchParams.get('limit'), 100, 1, MAX_PAGE),
      ...(key !== null ? { key } : {}),
    });
    return send(res, 200, page);
  }
  sendError(res, 'NOT_FOUND', `no route ${url.pathname}`);
}

/** The control API's server (not listening yet). */
export function createControlServer(opts: { registry: GrantRegistry; reports: ReportLog; token: string }): Server {
  const server = createServer({ headersTimeout: 10_000, requestTimeout: 60_000 }, (req, res) => {
    route(opts, req, res).catch((err: unknown) => {
      if (res.headersSent) return res.destroy();
      if (err instanceof ControlError) return sendError(res, err.code, err.message);
      sendError(res, 'INTERNAL', 'the proxy failed');
    });
  });
  return server;
}
