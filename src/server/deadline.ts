// A request's deadline: the caller says until when its answer is of use (`runlog-deadline: <epoch ms>`), and a
// request whose deadline has passed is refused before it acts. A supervisor stopped (SIGSTOP, a long GC pause, a
// swapped-out host) while a `runlog spawn` waited would otherwise spawn, minutes later, an instance its caller
// gave up on and never heard of.
import type { IncomingHttpHeaders } from 'node:http';
import { RunlogError, ValidationError } from '../domain/errors.ts';

/** The header a caller puts its deadline in: milliseconds since the Unix epoch, a whole number. */
export const DEADLINE_HEADER = 'runlog-deadline';

/** The request's deadline passed before the supervisor acted on it: nothing was done (HTTP 504). */
export class DeadlinePassedError extends RunlogError {
  constructor(deadlineMs: number, nowMs: number) {
    super(
      'DEADLINE_PASSED',
      `the request's deadline (${new Date(deadlineMs).toISOString()}) passed ${nowMs - deadlineMs} ms ` +
        'before the supervisor could act on it; nothing was done',
      { deadlineMs, nowMs },
    );
  }
}

/** The request's deadline in epoch ms, or null when it carries none. Throws DEADLINE_INVALID for a malformed one. */
export function requestDeadline(headers: IncomingHttpHeaders): number | null {
  const raw = headers[DEADLINE_HEADER];
  if (raw === undefined) return null;
  const text = Array.isArray(raw) ? raw.join(',') : raw;
  const ms = /^\d{1,15}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!Number.isSafeInteger(ms)) {
    throw new ValidationError(
      'DEADLINE_INVALID',
      `the ${DEADLINE_HEADER} header must be one whole number of milliseconds since the epoch, not ${JSON.stringify(text.slice(0, 40))}`,
      [`${DEADLINE_HEADER}: ${text.slice(0, 40)}`],
    );
  }
  return ms;
}

/** Throws DeadlinePassedError when the request's deadline is at or before `nowMs`; a request without one passes. */
export function assertBeforeDeadline(headers: IncomingHttpHeaders, nowMs: number): void {
  const deadline = requestDeadline(headers);
  if (deadline !== null && nowMs >= deadline) throw new DeadlinePassedError(deadline, nowMs);
}
