// Small HTTP helpers for the API: JSON responses with stable error bodies and bounded JSON request bodies. An
// error's HTTP status comes from its code's category (src/domain/error-codes.ts, the one table).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { httpStatusOf } from '../domain/error-codes.ts';
import { RunlogError, ValidationError, type ErrorCode } from '../domain/errors.ts';
import { assertBeforeDeadline } from './deadline.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

/** An error of the HTTP layer itself (auth, routing, body problems): its details stay out of the answer. */
export class HttpError extends RunlogError {
  /** From the code's category, as for every error. */
  readonly status: number;
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
    this.status = httpStatusOf(code);
  }
}

/** The status of an error: its code's category (error-codes.ts); anything that is not a RunlogError is a 500. */
export function statusFor(err: unknown): number {
  return err instanceof RunlogError ? httpStatusOf(err.code) : 500;
}

export interface ErrorBody {
  error: { code: string; message: string; issues?: readonly string[]; details?: Record<string, unknown> };
}

/** The JSON error body. Unexpected (non-runlog) errors never leak their message or stack. */
export function errorBody(err: unknown): ErrorBody {
  if (err instanceof ValidationError) return { error: { code: err.code, message: err.message, issues: err.issues } };
  if (err instanceof RunlogError) {
    return {
      error: {
        code: err.code,
        message: err.message,
        ...(err.details && !(err instanceof HttpError) ? { details: err.details } : {}),
      },
    };
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

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
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
    throw new HttpError('PAYLOAD_TOO_LARGE', `request body is ${declared} bytes; the limit is ${limit}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      throw new HttpError('PAYLOAD_TOO_LARGE', `request body is larger than ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  // A body that arrived after the caller's deadline is not acted on either (a write route acts right after this).
  assertBeforeDeadline(req.headers, Date.now());
  if (size === 0) return {};
  const type = String(req.headers['content-type'] ?? '');
  if (!/^application\/json\b/i.test(type)) {
    throw new HttpError('UNSUPPORTED_MEDIA_TYPE', `request body must be application/json, not '${type || 'none'}'`);
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw new HttpError('INVALID_JSON', `request body is not JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpError('INVALID_REQUEST', 'request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}
