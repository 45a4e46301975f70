// Plain HTTP for XRPC reads: one total deadline per request, bodies read with a byte cap, and failures mapped to
// our error codes (network / 5xx → PDS_UNREACHABLE, deadline → NETWORK_TIMEOUT; the XRPC error name is kept).
//
// The deadline covers the whole read: connecting, the headers AND the body. It is a plain timer that aborts an
// AbortController, both referenced until the body is consumed. (AbortSignal.timeout() alone is not enough: Node
// holds such a signal weakly, so once nothing else references it a garbage collection can drop its timer after
// the headers arrived, and a body trickling at 1 byte/s is then never cut off.) It is never later than the
// caller's `deadlineAt` (what is left of the execution's own deadline).

import { AtprotoError, type AtprotoErrorCode } from './errors.ts';

export const DEFAULT_TIMEOUT_MS = 10_000;

export interface HttpResult {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

export interface XrpcErrorBody {
  error?: string;
  message?: string;
}

/** What one request to a PDS or PLC directory did (metrics): `status` is null when no answer came. */
export interface HttpObservation {
  url: string;
  status: number | null;
  seconds: number;
}

/** Observers of every request (metrics). Small and synchronous; they must not throw. */
export const httpObservers = new Set<(o: HttpObservation) => void>();

export interface ReadDeadline {
  /** Longest a single read may take, in ms (default DEFAULT_TIMEOUT_MS). */
  timeoutMs?: number | undefined;
  /** Absolute bound (epoch ms): the read ends no later than this, whatever timeoutMs says. */
  deadlineAt?: number | undefined;
}

class ReadDeadlineExceeded extends Error {
  constructor(
    readonly budgetMs: number,
    readonly bound: 'read' | 'execution',
  ) {
    super(`deadline of ${budgetMs} ms exceeded`);
  }
}

/** The budget of one read: its own timeout, or what is left before `deadlineAt` when that is sooner. */
export function readBudget(d: ReadDeadline, now = Date.now()): { ms: number; bound: 'read' | 'execution' } {
  const own = d.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (d.deadlineAt === undefined) return { ms: own, bound: 'read' };
  const left = Math.floor(d.deadlineAt - now);
  return left < own ? { ms: Math.max(0, left), bound: 'execution' } : { ms: own, bound: 'read' };
}

export function deadlineError(url: string, what: string, budgetMs: number, bound: 'read' | 'execution'): AtprotoError {
  const why =
    bound === 'execution'
      ? `what was left of the execution's deadline (${budgetMs} ms)`
      : `its ${budgetMs} ms deadline`;
  return new AtprotoError('NETWORK_TIMEOUT', `${what}: ${url} did not answer completely within ${why}`, {
    url,
    budgetMs,
    bound,
  });
}

type GetOptions = ReadDeadline & { maxBytes: number; tooLarge: AtprotoErrorCode; what: string; accept?: string };

/** GET `url`; resolves for any HTTP status (callers branch on it). The body is read up to `maxBytes`. */
export async function httpGet(url: string, opts: GetOptions): Promise<HttpResult> {
  if (httpObservers.size === 0) return httpGetOnce(url, opts);
  const t0 = performance.now();
  let status: number | null = null;
  try {
    const r = await httpGetOnce(url, opts);
    status = r.status;
    return r;
  } catch (err) {
    const d = (err as { details?: { status?: unknown } }).details;
    status = typeof d?.status === 'number' ? d.status : null;
    throw err;
  } finally {
    const o = { url, status, seconds: (performance.now() - t0) / 1000 };
    for (const fn of httpObservers) fn(o);
  }
}

async function httpGetOnce(url: string, opts: GetOptions): Promise<HttpResult> {
  const budget = readBudget(opts);
  if (budget.ms <= 0) throw deadlineError(url, opts.what, 0, budget.bound);
  const expired = new ReadDeadlineExceeded(budget.ms, budget.bound);
  const deadline = new ReadTimer(budget.ms, expired);
  try {
    return await get(url, opts, deadline);
  } catch (err) {
    if (err === expired || deadline.fired) throw deadlineError(url, opts.what, budget.ms, budget.bound);
    throw err;
  } finally {
    deadline.clear();
  }
}

/**
 * One read's deadline: a plain timer (held by the event loop) that aborts the fetch AND rejects `expired`, which
 * every await of the read races against. Racing matters: fetch's own abort wiring may hold the request weakly
 * (undici on Node 20 keeps the fetch controller in a WeakRef), so after a collection an abort can reach nothing;
 * the race ends the read anyway and cancels the body stream we hold.
 */
class ReadTimer {
  readonly controller = new AbortController();
  readonly expired: Promise<never>;
  fired = false;
  readonly #timer: NodeJS.Timeout;
  constructor(ms: number, reason: ReadDeadlineExceeded) {
    let reject!: (e: unknown) => void;
    this.expired = new Promise<never>((_, r) => (reject = r));
    this.expired.catch(() => undefined); // observed through race(); never unhandled
    this.#timer = setTimeout(() => {
      this.fired = true;
      reject(reason);
      this.controller.abort(reason);
    }, ms);
  }
  race<T>(p: Promise<T>): Promise<T> {
    return Promise.race([p, this.expired]);
  }
  clear(): void {
    clearTimeout(this.#timer);
  }
}

async function get(
  url: string,
  opts: { maxBytes: number; tooLarge: AtprotoErrorCode; what: string; accept?: string },
  deadline: ReadTimer,
): Promise<HttpResult> {
  let res: Response;
  const pending = fetch(url, {
    signal: deadline.controller.signal,
    redirect: 'error',
    headers: opts.accept ? { accept: opts.accept } : {},
  });
  pending.catch(() => undefined); // when the deadline wins the race, the fetch's own rejection is not the answer
  try {
    res = await deadline.race(pending);
  } catch (err) {
    if (deadline.fired) throw err;
    throw unreachable(url, opts.what, err);
  }
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (res.ok && Number.isFinite(declared) && declared > opts.maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw new AtprotoError(opts.tooLarge, `${opts.what} is ${declared} bytes, more than the ${opts.maxBytes} allowed`, {
      url,
      size: declared,
      max: opts.maxBytes,
    });
  }
  // Error bodies are small XRPC JSON; never read more than 64 KiB of them.
  const cap = res.ok ? opts.maxBytes : 64 * 1024;
  const body = await readCapped(res, cap, url, opts.what, deadline);
  if (body === 'too-large') {
    if (res.ok)
      throw new AtprotoError(opts.tooLarge, `${opts.what} is more than the ${opts.maxBytes} bytes allowed`, {
        url,
        max: opts.maxBytes,
      });
    return { status: res.status, headers: res.headers, body: new Uint8Array() };
  }
  if (res.status >= 500) {
    throw new AtprotoError('PDS_UNREACHABLE', `${opts.what}: ${url} answered HTTP ${res.status}`, {
      url,
      status: res.status,
      ...xrpcError(body),
    });
  }
  return { status: res.status, headers: res.headers, body };
}

async function readCapped(
  res: Response,
  max: number,
  url: string,
  what: string,
  deadline: ReadTimer,
): Promise<Uint8Array | 'too-large'> {
  if (!res.body) return new Uint8Array();
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await deadline.race(reader.read());
      if (done) break;
      total += value.byteLength;
      if (total > max) {
        await reader.cancel().catch(() => undefined);
        return 'too-large';
      }
      chunks.push(value);
    }
  } catch (err) {
    // Out of time: stop the body ourselves (the connection is released), whatever the fetch's abort reached.
    if (deadline.fired) {
      reader.cancel(err).catch(() => undefined);
      throw err;
    }
    throw unreachable(url, what, err);
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.byteLength;
  }
  return out;
}

function unreachable(url: string, what: string, err: unknown): AtprotoError {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  const reason =
    e?.name === 'TimeoutError' ? 'timed out' : (e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err));
  return new AtprotoError(
    'PDS_UNREACHABLE',
    `${what}: could not reach ${url} (${reason})`,
    { url, reason },
    { cause: err },
  );
}

/** The XRPC `{error, message}` of an error body, if it is one. */
export function xrpcError(body: Uint8Array): XrpcErrorBody {
  try {
    const parsed: unknown = JSON.parse(new TextDecoder().decode(body));
    if (parsed && typeof parsed === 'object') {
      const { error, message } = parsed as Record<string, unknown>;
      return { ...(typeof error === 'string' ? { error } : {}), ...(typeof message === 'string' ? { message } : {}) };
    }
  } catch {
    // not JSON
  }
  return {};
}

export function parseJsonBody(
  r: HttpResult,
  url: string,
  what: string,
  code: AtprotoErrorCode = 'PDS_UNREACHABLE',
): unknown {
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(r.body));
  } catch (err) {
    throw new AtprotoError(code, `${what}: ${url} did not answer JSON`, { url, status: r.status }, { cause: err });
  }
}

export function xrpcUrl(service: string, nsid: string, params: Record<string, string>): string {
  const u = new URL(`/xrpc/${nsid}`, service);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}
