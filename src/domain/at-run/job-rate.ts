// The per-repo rate of job records (the operator policy's jobs.perRepoPerMinute): a token bucket per repo DID.
//
// A job record is written in the caller's own repo, so one account can write jobs as fast as its PDS lets it; the
// bucket lets a repo submit a burst of perRepoPerMinute jobs and then that many per minute, and refuses the rest with
// JOB_RATE_LIMITED (answered with a receipt, so the caller knows). It is pure: the clock is injected, and a bucket
// that has refilled is the same as no bucket, so full ones are swept and the map holds only the repos that are busy.

import type { JobIntakePolicy } from './operator-policy.ts';

const MINUTE_MS = 60_000;
/** The map is swept (full buckets dropped) when it grows past this, then past twice what the sweep left. */
const SWEEP_FLOOR = 1024;
/** Refills are fractions of a token: within this of a whole one counts as whole (999 ms + 1 ms is one second). */
const EPSILON = 1e-9;

export type JobRateDecision =
  | { allow: true; /** Whole jobs the repo may still submit right now. */ remaining: number }
  | {
      allow: false;
      code: 'JOB_RATE_LIMITED';
      message: string;
      /** When the next job would be allowed. */ retryAfterMs: number;
    };

interface Bucket {
  tokens: number;
  at: number;
}

/** Token buckets, one per repo DID, of `perRepoPerMinute` jobs refilled evenly over a minute. */
export class JobRate {
  private readonly buckets = new Map<string, Bucket>();
  private readonly capacity: number;
  private sweepAt = SWEEP_FLOOR;

  constructor(
    policy: Pick<JobIntakePolicy, 'perRepoPerMinute'>,
    private readonly clock: () => number = Date.now,
  ) {
    this.capacity = policy.perRepoPerMinute;
  }

  /** Takes one job from `repo`'s bucket: allowed while it has a whole token, refused with JOB_RATE_LIMITED otherwise. */
  take(repo: string): JobRateDecision {
    const now = this.clock();
    const bucket = this.refilled(repo, now);
    if (bucket.tokens >= 1 - EPSILON) {
      bucket.tokens = Math.max(0, bucket.tokens - 1);
      this.buckets.set(repo, bucket);
      this.sweep(now);
      return { allow: true, remaining: Math.floor(bucket.tokens + EPSILON) };
    }
    this.buckets.set(repo, bucket);
    const retryAfterMs = Math.ceil(((1 - bucket.tokens) * MINUTE_MS) / this.capacity - EPSILON);
    return {
      allow: false,
      code: 'JOB_RATE_LIMITED',
      message:
        `repo ${repo} submitted more than ${this.capacity} jobs in a minute (this runner's jobs.perRepoPerMinute); ` +
        `retry in ${retryAfterMs} ms`,
      retryAfterMs,
    };
  }

  /** Repos with a bucket that has not refilled yet (the others are forgotten). */
  get tracked(): number {
    return this.buckets.size;
  }

  private refilled(repo: string, now: number): Bucket {
    const b = this.buckets.get(repo);
    if (!b) return { tokens: this.capacity, at: now };
    // A clock that steps back refills nothing (and takes nothing back).
    const elapsed = Math.max(0, now - b.at);
    return {
      tokens: Math.min(this.capacity, b.tokens + (elapsed * this.capacity) / MINUTE_MS),
      at: Math.max(now, b.at),
    };
  }

  private sweep(now: number): void {
    if (this.buckets.size <= this.sweepAt) return;
    for (const [repo] of this.buckets)
      if (this.refilled(repo, now).tokens >= this.capacity - EPSILON) this.buckets.delete(repo);
    this.sweepAt = Math.max(SWEEP_FLOOR, 2 * this.buckets.size);
  }
}
