// The one place the expected-version rule lives: what 'no-stream' | 'stream-exists' | 'any' | <version> accept,
// the error a mismatch is, and the two helpers every store on the port repeats otherwise (a request's conflict
// outcome; appendToStream as a one-request appendMany). PostgreSQL applies the same rule inside append_events
// (postgres/schema.ts), where it must run under the append lock; its outcomes come back through conflictOutcome too.
import { ConcurrencyError } from '../domain/errors.ts';
import type { NewEvent } from '../domain/events.ts';
import type {
  AppendExtras,
  AppendToStreamResult,
  ExpectedStreamVersion,
  StreamAppend,
  StreamAppendOutcome,
} from './port.ts';

/** Whether a stream at version `actual` (0 = no stream) satisfies `expected`. */
export function versionMatches(expected: ExpectedStreamVersion, actual: number): boolean {
  if (expected === 'any') return true;
  if (expected === 'no-stream') return actual === 0;
  if (expected === 'stream-exists') return actual > 0;
  return expected === actual;
}

/** A well-formed expectedVersion. */
export const isVersion = (v: unknown): boolean =>
  v === 'no-stream' || v === 'stream-exists' || v === 'any' || (Number.isSafeInteger(v) && (v as number) >= 0);

/** ConcurrencyError for any expectedVersion form (code CONCURRENCY, like every version conflict). */
export class ExpectedVersionError extends ConcurrencyError {
  constructor(
    stream: string,
    readonly expectedVersion: ExpectedStreamVersion,
    actual: number,
  ) {
    super(
      stream,
      typeof expectedVersion === 'number' ? expectedVersion : expectedVersion === 'no-stream' ? 0 : -1,
      actual,
    );
    if (expectedVersion === 'stream-exists') this.message = `stream ${stream}: expected it to exist, found no events`;
  }
}

/** The outcome of a request whose expected version does not match (null: it matches). */
export function conflictOutcome(
  request: Pick<StreamAppend, 'stream' | 'expectedVersion'>,
  actual: number,
  matched = versionMatches(request.expectedVersion, actual),
): StreamAppendOutcome | null {
  return matched
    ? null
    : { ok: false, error: new ExpectedVersionError(request.stream, request.expectedVersion, actual) };
}

/** appendToStream as a one-request appendMany (its row and snapshot too): the result, or the request's error thrown. */
export async function appendOne(
  appendMany: (requests: readonly StreamAppend[]) => Promise<StreamAppendOutcome[]>,
  stream: string,
  events: readonly NewEvent[],
  expectedVersion: ExpectedStreamVersion,
  extras: AppendExtras = {},
): Promise<AppendToStreamResult> {
  const [o] = await appendMany([
    {
      stream,
      events,
      expectedVersion,
      ...(extras.row ? { row: extras.row } : {}),
      ...(extras.snapshot ? { snapshot: extras.snapshot } : {}),
    },
  ]);
  if (!o!.ok) throw o!.error;
  return o!.result;
}
