// Small HTTP helpers for the API: JSON responses with stable error bodies, bounded JSON request
// bodies, and the mapping from runlog's error codes to HTTP statuses.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RunlogError, ValidationError } from '../domain/errors.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

/** An error that already knows its HTTP status (auth, routing, body problems). */
export class HttpError extends RunlogError {
  constructor(readonly status: number, code: string, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
  }
}

const CONFLICT = new Set(['ILLEGAL_EVENT', 'CONCURRENCY', 'ACTOR_EXISTS']);
const BAD_REQUEST = new Set(['USAGE', 'REPLAY', 'INVALID_REQUEST', 'INVALID_JSON']);
const TOO_LARGE = new Set(['INPUT_TOO_LARGE', 'PAYLOAD_TOO_LARGE']);

/** NOT_FOUND → 404; INPUT_TOO_LARGE → 413; validation-like codes → 400; ILLEGAL_EVENT/CONCURRENCY → 409; NOT_IMPLEMENTED → 501; TIMEOUT → 504; the rest → 500. */
export function statusFor(err: unknown): number {
  if (err instanceof HttpError) return err.status;
  if (!(err instanceof RunlogError)) return 500;
  const code = err.code;
  if (code === 'NOT_FOUND') return 404;
  if (CONFLICT.has(code)) return 409;
  if (TOO_LARGE.has(code)) return 413;
  if (err instanceof ValidationError || BAD_REQUEST.has(code) || /(_INVALID|_MISSING|_NOT_ALLOWED|_MISMATCH)$/.test(code)) return 400;
  if (code === 'NOT_IMPLEMENTED') return 501;
  if (code === 'HOST_CLOSED' || code === 'STORE_CLOSED' || code === 'STORE_BUSY') return 503;
  if (code === 'TIMEOUT') return 504;
  return 500;
}

export interface ErrorBody {
  error: { code: string; message: string; issues?: readonly string[]; details?: Record<string, unknown> };
}

/** The JSON error body. Unexpected (non-runlog) errors never leak their message or stack. */
export function errorBody(err: unknown): ErrorBody {
  if (err instanceof ValidationError) return { error: { code: err.code, message: err.message, issues: err.issues } };
  if (err instanceof RunlogError) {
    return { error: { code: err.code, message: err.message, ...(err.details && !(err instanceof HttpError) ? { details: err.details } : {}) } };
  }
  return { error: { code: 'INTERNAL', message: 'internal error (see the supervisor log)' } };
}

export const SECURITY_HEADERS: Record<string, string> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

export function sendError(res: ServerResponse, err: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, statusFor(err), errorBody(err), headers);
}

/** Reads a JSON object body of at most MAX_BODY_BYTES. An empty body reads as {}. */
export async function readJsonBody(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<Record<string, unknown>> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > limit) {
    throw new HttpError(413, 'PAYLOAD_TOO_LARGE', `request body is ${declared} bytes; the limit is ${limit}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      throw new HttpError(413, 'PAYLOAD_TOO_LARGE', `request body is larger than ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  if (size === 0) return {};
  const type = String(req.headers['content-type'] ?? '');
  if (!/^application\/json\b/i.test(type)) {
    throw new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', `request body must be application/json, not '${type || 'none'}'`);
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw new HttpError(400, 'INVALID_JSON', `request body is not JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpError(400, 'INVALID_REQUEST', 'request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}
