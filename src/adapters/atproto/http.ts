// Plain HTTP for XRPC reads: one timeout per request, bodies read with a byte cap, and failures mapped to
// our error codes (network / 5xx → PDS_UNREACHABLE; the XRPC error name is kept in details).

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

/** GET `url`; resolves for any HTTP status (callers branch on it). The body is read up to `maxBytes`. */
export async function httpGet(
  url: string,
  opts: { timeoutMs?: number; maxBytes: number; tooLarge: AtprotoErrorCode; what: string; accept?: string },
): Promise<HttpResult> {
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

async function httpGetOnce(
  url: string,
  opts: { timeoutMs?: number; maxBytes: number; tooLarge: AtprotoErrorCode; what: string; accept?: string },
): Promise<HttpResult> {
  const signal = AbortSignal.timeout(opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  let res: Response;
  try {
    res = await fetch(url, { signal, redirect: 'error', headers: opts.accept ? { accept: opts.accept } : {} });
  } catch (err) {
    throw unreachable(url, opts.what, err);
  }
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (res.ok && Number.isFinite(declared) && declared > opts.maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw new AtprotoError(opts.tooLarge, `${opts.what} is ${declared} bytes, more than the ${opts.maxBytes} allowed`, { url, size: declared, max: opts.maxBytes });
  }
  // Error bodies are small XRPC JSON; never read more than 64 KiB of them.
  const cap = res.ok ? opts.maxBytes : 64 * 1024;
  const body = await readCapped(res, cap, url, opts.what);
  if (body === 'too-large') {
    if (res.ok) throw new AtprotoError(opts.tooLarge, `${opts.what} is more than the ${opts.maxBytes} bytes allowed`, { url, max: opts.maxBytes });
    return { status: res.status, headers: res.headers, body: new Uint8Array() };
  }
  if (res.status >= 500) {
    throw new AtprotoError('PDS_UNREACHABLE', `${opts.what}: ${url} answered HTTP ${res.status}`, { url, status: res.status, ...xrpcError(body) });
  }
  return { status: res.status, headers: res.headers, body };
}

async function readCapped(res: Response, max: number, url: string, what: string): Promise<Uint8Array | 'too-large'> {
  if (!res.body) return new Uint8Array();
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > max) {
        await reader.cancel().catch(() => undefined);
        return 'too-large';
      }
      chunks.push(value);
    }
  } catch (err) {
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
  const reason = e?.name === 'TimeoutError' ? 'timed out' : (e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err));
  return new AtprotoError('PDS_UNREACHABLE', `${what}: could not reach ${url} (${reason})`, { url, reason }, { cause: err });
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

export function parseJsonBody(r: HttpResult, url: string, what: string, code: AtprotoErrorCode = 'PDS_UNREACHABLE'): unknown {
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
