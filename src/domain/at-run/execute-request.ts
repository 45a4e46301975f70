// An execution request as a caller sends it (library or HTTP), checked before anything is appended: every field
// has its own typed code, and the input must be plain JSON within the operator's limits (json-input.ts), so the
// `execution.requested` event can always be encoded and the request never reaches a shared commit malformed.
import { ValidationError } from '../errors.ts';
import { snapshotJsonInput } from '../json-input.ts';
import { HANDLER_NAME_RE } from './code-record.ts';
import type { InputLimits } from './operator-policy.ts';

export interface ExecuteFields {
  uri: string;
  handler: string;
  input: unknown;
  callerDid: string | null;
  timeoutMs: number | null;
  /** UTF-8 bytes of the input's JSON encoding. */
  inputBytes: number;
}

const DID_RE = /^did:[a-z]+:[A-Za-z0-9._:%-]{1,2040}$/;
/** Longest request timeout accepted (the effective one is further clamped by the policy's ceiling). */
export const MAX_REQUEST_TIMEOUT_MS = 24 * 3600_000;

const show = (v: unknown): string => {
  if (typeof v === 'string') return JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v);
  if (typeof v === 'bigint') return `${v}n`;
  return typeof v === 'object' && v !== null ? Object.prototype.toString.call(v) : String(v);
};

/**
 * Validates what `execute()` was given. Throws ValidationError AT_URI_INVALID, HANDLER_INVALID,
 * CALLER_DID_INVALID or TIMEOUT_INVALID for the fields, then INPUT_INVALID / INPUT_TOO_LARGE for the input.
 * An absent input is `null`.
 */
export function checkExecuteRequest(o: unknown, limits: InputLimits): ExecuteFields {
  if (typeof o !== 'object' || o === null)
    throw new ValidationError(
      'EXECUTE_INVALID',
      'execute() takes an object { uri, handler, input?, callerDid?, timeoutMs? }',
    );
  const r = o as Record<string, unknown>;
  if (typeof r.uri !== 'string' || !r.uri.startsWith('at://') || r.uri.length > 8192 || /\s/.test(r.uri))
    throw new ValidationError('AT_URI_INVALID', `not an at:// URI: ${show(r.uri)}`);
  if (typeof r.handler !== 'string' || !HANDLER_NAME_RE.test(r.handler))
    throw new ValidationError('HANDLER_INVALID', `handler must be an identifier, got ${show(r.handler)}`);
  let callerDid: string | null = null;
  if (r.callerDid !== undefined && r.callerDid !== null) {
    if (typeof r.callerDid !== 'string' || !DID_RE.test(r.callerDid))
      throw new ValidationError('CALLER_DID_INVALID', `callerDid must be a DID, got ${show(r.callerDid)}`);
    callerDid = r.callerDid;
  }
  let timeoutMs: number | null = null;
  if (r.timeoutMs !== undefined && r.timeoutMs !== null) {
    if (
      typeof r.timeoutMs !== 'number' ||
      !Number.isSafeInteger(r.timeoutMs) ||
      r.timeoutMs < 1 ||
      r.timeoutMs > MAX_REQUEST_TIMEOUT_MS
    ) {
      throw new ValidationError(
        'TIMEOUT_INVALID',
        `timeoutMs must be a whole number of ms from 1 to ${MAX_REQUEST_TIMEOUT_MS}, got ${show(r.timeoutMs)}`,
      );
    }
    timeoutMs = r.timeoutMs;
  }
  const given = r.input === undefined ? null : r.input;
  // The input is read once: the check makes the private copy that is stored, so a getter answering the check with
  // one value and a second read with another cannot get the second past the limits, and the caller changing its
  // object afterwards cannot change the request.
  const { value: input, bytes: inputBytes } = snapshotJsonInput(given, limits, 'input');
  return { uri: r.uri, handler: r.handler, input, callerDid, timeoutMs, inputBytes };
}
