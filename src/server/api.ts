// The HTTP API over the library (`Runlog`): read endpoints replay the log, write endpoints call the
// supervisor's typed operations. JSON in and out, stable keys; errors are `{ error: { code, message } }`.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PAGE_LIMIT, readEventsPage, readLogPage, replayPage } from '../inspect/actor-pages.ts';
import { inspectActor, resolveActor } from '../inspect/inspection.ts';
import type { Runlog } from '../supervisor/runlog.ts';
import type { RunlogInternals } from '../supervisor/runlog-internals.ts';
import { NotFoundError, RunlogError } from '../domain/errors.ts';
import { assertNodeChoice, NODE_NAME } from '../domain/placement.ts';
import type { ActorKind } from '../domain/events.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/supervisor
import { machines } from '../machines/runtime.ts';
import { ENVELOPE_OVERHEAD_BYTES } from '../domain/at-run/operator-policy.ts';
import { assertBeforeDeadline } from './deadline.ts';
import { HttpError, MAX_BODY_BYTES, readJsonBody, sendJson } from './http.ts';
import { describeMachine, type MachineChart } from './machine-graph.ts';
import type { SseHub } from './sse.ts';
import { Checker, queryBool, queryInt } from './validate.ts';

export interface ApiContext {
  runlog: Runlog;
  /** The runlog's event log (runlog-internals.ts): the read endpoints page through it. */
  store: RunlogInternals['store'];
  sse: SseHub;
  startedAt: string;
}

interface RouteArgs {
  req: IncomingMessage;
  res: ServerResponse;
  params: string[];
  query: URLSearchParams;
}

interface Route {
  method: 'GET' | 'POST' | 'DELETE';
  /** As written in the table (`/api/actors/:id`), for the OpenAPI document's check. */
  path: string;
  pattern: RegExp;
  handle(ctx: ApiContext, args: RouteArgs): Promise<void> | void;
}

/** `node` in a request: 'any' or a node name (src/domain/placement.ts). */
const NODE_CHOICE = NODE_NAME;

const KINDS: readonly ActorKind[] = ['instance', 'execution'];
const SEG = '([^/]+)';
/** Tool names as manifests spell them (the library re-validates). */
const TOOL = /^(?:\*|[a-z0-9][a-z0-9._+-]{0,63})$/;

const charts = new Map<string, MachineChart>();
function chartFor(kind: string): MachineChart {
  if (!KINDS.includes(kind as ActorKind)) throw new NotFoundError('machine', kind);
  let c = charts.get(kind);
  if (!c) {
    c = describeMachine(kind, machines[kind as ActorKind]);
    charts.set(kind, c);
  }
  return c;
}

/** `?after=` and `?limit=` of a per-actor page: limit 1..PAGE_LIMIT, default PAGE_LIMIT. */
function pageQuery(c: Checker, query: URLSearchParams): { after?: number; limit: number } {
  const after = queryInt(c, query, 'after', 0);
  const limit = queryInt(c, query, 'limit', 1) ?? PAGE_LIMIT;
  if (limit > PAGE_LIMIT) c.problem(`?limit must be at most ${PAGE_LIMIT}`);
  return { ...(after !== undefined ? { after } : {}), limit };
}

/** A link to the trace in the user's tracing UI: RUNLOG_TRACE_URL with {traceId} (e.g. http://jaeger:16686/trace/{traceId}). */
function traceUrl(traceId: string | null): string | null {
  const template = process.env.RUNLOG_TRACE_URL;
  return traceId && template && /^https?:\/\//.test(template) ? template.replaceAll('{traceId}', traceId) : null;
}

const route = (method: Route['method'], path: string, handle: Route['handle']): Route => ({
  method,
  path,
  pattern: new RegExp(`^${path.replaceAll(':id', SEG).replaceAll(':kind', SEG).replaceAll(':tool', SEG)}$`),
  handle,
});

const routes: Route[] = [
  route('GET', '/api/health', async ({ runlog, store, startedAt }, { res }) => {
    const [live, lastSeq, supervision] = await Promise.all([runlog.list(), store.lastSeq(), runlog.supervision()]);
    sendJson(res, 200, {
      ok: true,
      home: runlog.home,
      db: runlog.dbPath,
      pid: process.pid,
      startedAt,
      live: live.length,
      lastSeq,
      supervision,
    });
  }),

  // The supervisors sharing this log, their heartbeats and the actors each owns (a cluster's log; on SQLite the one).
  route('GET', '/api/nodes', async ({ runlog }, { res }) => {
    sendJson(res, 200, await runlog.nodes());
  }),

  route('GET', '/api/actors', async ({ runlog }, { res, query }) => {
    const c = new Checker('query');
    const kind = c.oneOf(Object.fromEntries(query), 'kind', KINDS);
    const all = queryBool(c, query, 'all');
    c.done();
    sendJson(res, 200, { actors: await runlog.list({ all, ...(kind ? { kind } : {}) }) });
  }),

  route('GET', '/api/actors/:id', async ({ runlog, store }, { res, params }) => {
    // From the newest snapshot, yielding while it folds (inspection.ts).
    const view = await inspectActor(store, params[0]!);
    sendJson(res, 200, { ...view, supervision: await runlog.supervision(), traceUrl: traceUrl(view.traceId) });
  }),

  // A page of the actor's events (at most ?limit, default 1000): ?after=<version> and the answer's `next` page on.
  route('GET', '/api/actors/:id/events', async ({ store }, { res, params, query }) => {
    const c = new Checker('query');
    const from = queryInt(c, query, 'from', 1);
    const to = queryInt(c, query, 'to', 1);
    const page = pageQuery(c, query);
    c.done();
    sendJson(
      res,
      200,
      await readEventsPage(store, params[0]!, {
        ...page,
        ...(from !== undefined ? { from } : {}),
        ...(to !== undefined ? { to } : {}),
      }),
    );
  }),

  // The state at ?to (default: now) from the nearest snapshot, and a page of the steps up to it (?after, ?limit, `next`).
  route('GET', '/api/actors/:id/replay', async ({ store }, { res, params, query }) => {
    const c = new Checker('query');
    const to = queryInt(c, query, 'to', 0);
    const page = pageQuery(c, query);
    const steps = query.get('steps') ?? 'full';
    if (!['full', 'brief', 'none'].includes(steps)) c.problem(`?steps must be full, brief or none, not '${steps}'`);
    c.done();
    const view = await replayPage(store, params[0]!, {
      ...page,
      ...(to !== undefined ? { to } : {}),
      steps: steps !== 'none',
    });
    const out = steps === 'brief' ? { ...view, steps: view.steps.map(({ context: _context, ...rest }) => rest) } : view;
    sendJson(res, 200, out);
  }),

  route('GET', '/api/events', async ({ store }, { res, query }) => {
    const c = new Checker('query');
    const afterSeq = queryInt(c, query, 'afterSeq', 0);
    const limit = queryInt(c, query, 'limit', 1) ?? 100;
    if (limit > 1000) c.problem('?limit must be at most 1000');
    c.done();
    // Without ?afterSeq: the latest `limit` events of the whole log (the inspector's activity feed).
    const after = afterSeq ?? Math.max(0, (await store.lastSeq()) - limit);
    sendJson(res, 200, { events: await readLogPage(store, after, limit) });
  }),

  route('GET', '/api/events/stream', (ctx, { req, res, query }) => {
    const c = new Checker('query');
    const afterSeq = queryInt(c, query, 'afterSeq', 0);
    c.done();
    ctx.sse.open(req, res, afterSeq === undefined ? {} : { afterSeq });
  }),

  route('GET', '/api/actors/:id/events/stream', async (ctx, { req, res, params, query }) => {
    const c = new Checker('query');
    const afterSeq = queryInt(c, query, 'afterSeq', 0);
    c.done();
    const ref = await resolveActor(ctx.store, params[0]!);
    ctx.sse.open(req, res, { stream: ref.stream, ...(afterSeq === undefined ? {} : { afterSeq }) });
  }),

  route('GET', '/api/machines/:kind', (_ctx, { res, params }) => {
    sendJson(res, 200, chartFor(params[0]!));
  }),

  route('POST', '/api/instances', async ({ runlog }, { req, res }) => {
    const body = await readJsonBody(req);
    const c = new Checker('request body');
    if (body.node !== undefined) assertNodeChoice(body.node); // NODE_INVALID, as the library says it
    c.only(body, ['appDir', 'sandbox', 'instanceId', 'node']);
    const appDir = c.string(body, 'appDir', {
      required: true,
      max: 4096,
      pattern: /^\//,
      hint: 'must be an absolute path',
    });
    const sandbox = c.oneOf(body, 'sandbox', ['proot', 'container'] as const);
    const instanceId = c.string(body, 'instanceId', {
      max: 128,
      pattern: /^[A-Za-z0-9][A-Za-z0-9_.-]*$/,
      hint: 'may hold only letters, digits, _ . -',
    });
    const node = c.string(body, 'node', { max: 63, pattern: NODE_CHOICE, hint: "must be 'any' or a node name" });
    c.done();
    const view = await runlog.spawnApp({
      appDir: appDir!,
      ...(sandbox ? { sandbox } : {}),
      ...(instanceId ? { instanceId } : {}),
      ...(node ? { node } : {}),
    });
    sendJson(res, 201, view);
  }),

  route('POST', '/api/actors/:id/stop', async ({ runlog }, { req, res, params }) => {
    const body = await readJsonBody(req);
    const c = new Checker('request body');
    c.only(body, ['graceMs']);
    const graceMs = c.integer(body, 'graceMs', { min: 0, max: 600_000 });
    c.done();
    sendJson(res, 200, await runlog.stop(params[0]!, graceMs === undefined ? {} : { graceMs }));
  }),

  route('POST', '/api/actors/:id/kill', async ({ runlog }, { req, res, params }) => {
    const body = await readJsonBody(req);
    const c = new Checker('request body');
    c.only(body, []);
    c.done();
    sendJson(res, 200, await runlog.kill(params[0]!));
  }),

  // `cap grant`/`cap revoke`: per APP (every running and later instance of it), recorded in the log (app-grants.ts).
  route('POST', '/api/apps/:id/tools', async ({ runlog }, { req, res, params }) => {
    const body = await readJsonBody(req);
    const c = new Checker('request body');
    c.only(body, ['tool']);
    const tool = c.string(body, 'tool', { required: true, pattern: TOOL, hint: 'is not a tool name' });
    c.done();
    sendJson(res, 200, await runlog.grant(params[0]!, tool!));
  }),

  route('DELETE', '/api/apps/:id/tools/:tool', async ({ runlog }, { res, params }) => {
    const c = new Checker('path');
    const tool = c.string({ tool: params[1] }, 'tool', { required: true, pattern: TOOL, hint: 'is not a tool name' });
    c.done();
    sendJson(res, 200, await runlog.revoke(params[0]!, tool!));
  }),

  // An instance's output: NDJSON lines ({stream, line, at}); ?follow=1 keeps the response open until it exits.
  route('GET', '/api/actors/:id/logs', async ({ runlog }, { req, res, params, query }) => {
    const qc = new Checker('query');
    const follow = queryBool(qc, query, 'follow');
    qc.done();
    // A client gone away ends the follow (a remote one tells its owner to stop publishing at once).
    const gone = new AbortController();
    req.on('close', () => gone.abort());
    const lines = runlog.logs(params[0]!, { follow, signal: gone.signal })[Symbol.asyncIterator]();
    // The first line (or the end) before the headers: an error (another node's instance that cannot be served,
    // NODE_UNAVAILABLE, HANDOVER_TIMEOUT) is still answered with its status.
    let next = await lines.next();
    res.writeHead(200, {
      'content-type': 'application/x-ndjson; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    });
    try {
      while (!next.done && !gone.signal.aborted) {
        res.write(`${JSON.stringify(next.value)}\n`);
        next = await lines.next();
      }
    } catch (err) {
      // Past the headers an error (a remote follow lost: FOLLOW_LOST) is the last line, `{"error":{code,message}}`.
      const code = err instanceof RunlogError ? err.code : 'API_ERROR';
      res.write(`${JSON.stringify({ error: { code, message: (err as Error).message } })}\n`);
    }
    await lines.return?.();
    res.end();
  }),

  route('POST', '/api/reconcile', async ({ runlog }, { req, res }) => {
    const body = await readJsonBody(req);
    const c = new Checker('request body');
    c.only(body, ['dryRun']);
    if (body.dryRun !== undefined && typeof body.dryRun !== 'boolean') c.problem('dryRun must be true or false');
    c.done();
    sendJson(res, 200, await runlog.reconcile({ dryRun: body.dryRun === true }));
  }),

  route('POST', '/api/executions', async ({ runlog }, { req, res }) => {
    // The body may carry an input as large as the operator allows, plus the other fields. The input itself is
    // checked by execute() before anything is appended (INPUT_INVALID → 400, INPUT_TOO_LARGE → 413).
    const body = await readJsonBody(
      req,
      Math.max(MAX_BODY_BYTES, runlog.policy.input.maxBytes + ENVELOPE_OVERHEAD_BYTES),
    );
    const c = new Checker('request body');
    if (body.node !== undefined) assertNodeChoice(body.node); // NODE_INVALID, as the library says it
    c.only(body, ['uri', 'handler', 'input', 'timeoutMs', 'callerDid', 'node', 'nodeWaitMs']);
    const node = c.string(body, 'node', { max: 63, pattern: NODE_CHOICE, hint: "must be 'any' or a node name" });
    const uri = c.string(body, 'uri', {
      required: true,
      max: 8192,
      pattern: /^at:\/\/\S+$/,
      hint: 'must be an at:// URI',
    });
    const handler = c.string(body, 'handler', { required: true, max: 256 });
    const timeoutMs = c.integer(body, 'timeoutMs', { min: 1, max: 24 * 3600_000 });
    const nodeWaitMs = c.integer(body, 'nodeWaitMs', { min: 0, max: 24 * 3600_000 });
    const callerDid = c.string(body, 'callerDid', { max: 2048, pattern: /^did:[a-z]+:\S+$/, hint: 'must be a DID' });
    c.done();
    const outcome = await runlog.execute({
      uri: uri!,
      handler: handler!,
      input: body.input ?? null,
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      ...(callerDid ? { callerDid } : {}),
      ...(node ? { node } : {}),
      ...(nodeWaitMs !== undefined ? { nodeWaitMs } : {}),
    });
    sendJson(res, 200, outcome);
  }),
];

/** The route table as `METHOD /path` (docs/reference/openapi.json must document each, and nothing else). */
export const apiRouteTable = (): string[] => routes.map((r) => `${r.method} ${r.path}`);

/** Routes one /api request (auth was checked by the caller). */
export async function handleApi(ctx: ApiContext, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  const allowed: string[] = [];
  for (const r of routes) {
    const m = r.pattern.exec(url.pathname);
    if (!m) continue;
    if (r.method !== req.method) {
      allowed.push(r.method);
      continue;
    }
    let params: string[];
    try {
      params = m.slice(1).map((p) => decodeURIComponent(p));
    } catch {
      throw new HttpError('INVALID_REQUEST', 'malformed percent-encoding in the path');
    }
    // A caller that has given up is not acted for (deadline.ts); readJsonBody checks again once the body is in.
    assertBeforeDeadline(req.headers, Date.now());
    await r.handle(ctx, { req, res, params, query: url.searchParams });
    return;
  }
  if (allowed.length > 0)
    throw new HttpError(
      'METHOD_NOT_ALLOWED',
      `${req.method} is not allowed on ${url.pathname} (allowed: ${allowed.join(', ')})`,
      { allow: allowed },
    );
  throw new HttpError('NOT_FOUND', `no such endpoint: ${req.method} ${url.pathname}`);
}
