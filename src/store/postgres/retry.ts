// Bounded retries of the PostgreSQL failures that say "try again": a serialization failure (40001), a deadlock
// PostgreSQL broke (40P01) and a lock wait cut off by lock_timeout (55P03). Each of them rolls the transaction back
// as a whole (the statement that failed is never the COMMIT's success), so running the transaction again from the
// start is safe and writes nothing twice. They never reach an actor as an effect failure: a few tries, with a short
// growing randomised pause, and after the last one the failure is reported as the store being unavailable
// (STORE_UNAVAILABLE), which the actor host already waits out for observed facts.

/** SQLSTATEs whose transaction rolled back whole and may simply be run again. */
export const RETRYABLE_SQLSTATES: ReadonlySet<string> = new Set(['40001', '40P01', '55P03']);

export interface RetryPolicy {
  /** Tries in all (default 6). */
  attempts?: number;
  /** First pause (ms, default 10); each next one up to twice as long, randomised, at most `maxDelayMs`. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

/** The SQLSTATE of a node-postgres error (empty when it has none). */
export function sqlState(err: unknown): string {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : '';
}

export function isRetryable(err: unknown): boolean {
  return RETRYABLE_SQLSTATES.has(sqlState(err));
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `attempt` until it succeeds, fails with something that is not retryable (thrown as it is), or has failed
 * retryably `attempts` times: then `giveUp(lastError, tries)` is thrown.
 */
export async function withRetries<T>(
  attempt: (n: number) => Promise<T>,
  giveUp: (err: unknown, tries: number) => unknown,
  policy: RetryPolicy = {},
): Promise<T> {
  const attempts = Math.max(1, policy.attempts ?? 6);
  const sleep = policy.sleep ?? pause;
  const random = policy.random ?? Math.random;
  let delay = policy.baseDelayMs ?? 10;
  const maxDelay = policy.maxDelayMs ?? 500;
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (!isRetryable(err)) throw err;
      if (n >= attempts) throw giveUp(err, n);
      await sleep(Math.round(delay * (0.5 + random())));
      delay = Math.min(maxDelay, delay * 2);
    }
  }
}
