// A short-TTL, in-process cache of ONE step of resolution: DID → DID document (PDS endpoint, #atproto key).
//
// Why: a strict execution reads the author's and the runtime publisher's DID documents on every run (three
// lookups), although a DID document changes rarely (a PDS migration, a key rotation) while the records it
// authorizes change often. Nothing else is cached: every run still fetches the records from the PDS, verifies
// their commit signatures and MST inclusion proofs, recomputes the record and blob CIDs and resolves aliases.
//
// What it costs: for at most `ttlMs` after a DID document changes, the previous document may still be used. A
// failure that a changed document would explain (see STALE_SYMPTOMS in reader.ts) is retried once with a freshly
// read document, so a migration or a rotation to a new key is picked up at once; what the TTL leaves open is a
// compromised key that was rotated away still being accepted for up to `ttlMs`. Set it to 0 to read the
// document on every lookup (RUNLOG_DID_CACHE_TTL_MS=0, or `atproto: { didCacheTtlMs: 0 }`).
//
// Failures are never cached; concurrent misses for one DID share one read; the cache holds at most `maxEntries`
// documents (the oldest read is dropped first).

import { RunlogError } from '../../domain/errors.ts';
import type { ResolvedIdentity } from './identity.ts';

/** Default TTL of a cached DID document: short enough that a rotation is honoured within half a minute. */
export const DEFAULT_DID_CACHE_TTL_MS = 30_000;
/** The longest TTL accepted: this is a latency cache, not a way to stop watching identities. */
export const MAX_DID_CACHE_TTL_MS = 10 * 60_000;
export const DEFAULT_DID_CACHE_ENTRIES = 1024;

export interface IdentityCacheOptions {
  /** How long a DID document is reused, in ms. 0 disables the cache. Default 30 s. */
  ttlMs?: number;
  maxEntries?: number;
  /** Monotonic clock in ms (tests pass a fake one). */
  now?: () => number;
}

export interface IdentityLookup {
  identity: ResolvedIdentity;
  /** True when the document was read before this lookup (a stale one is possible); false when read for it. */
  fromCache: boolean;
}

export interface IdentityCache {
  readonly ttlMs: number;
  /** The cached identity when fresh, else `read(did)` (shared by concurrent callers), stored on success. */
  lookup(did: string, read: (did: string) => Promise<ResolvedIdentity>): Promise<IdentityLookup>;
  /** Forgets a DID (its next lookup reads the document); an in-flight read for it is not stored. */
  invalidate(did: string): void;
  clear(): void;
  readonly size: number;
}

export class IdentityCacheConfigError extends RunlogError {
  constructor(message: string, details: Record<string, unknown>) {
    super('DID_CACHE_CONFIG_INVALID', message, details);
  }
}

interface Entry {
  identity: ResolvedIdentity;
  /** When the read that produced it started: the document is at least this old. */
  readAt: number;
}

/** Throws DID_CACHE_CONFIG_INVALID unless `ttlMs` is an integer in [0, MAX_DID_CACHE_TTL_MS]. */
export function assertDidCacheTtl(ttlMs: unknown): number {
  if (typeof ttlMs !== 'number' || !Number.isSafeInteger(ttlMs) || ttlMs < 0 || ttlMs > MAX_DID_CACHE_TTL_MS) {
    throw new IdentityCacheConfigError(
      `the DID document cache TTL must be an integer number of ms from 0 to ${MAX_DID_CACHE_TTL_MS}, got ${JSON.stringify(ttlMs)}`,
      { ttlMs },
    );
  }
  return ttlMs;
}

class TtlIdentityCache implements IdentityCache {
  readonly ttlMs: number;
  readonly #max: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  readonly #reading = new Map<string, Promise<ResolvedIdentity>>();

  constructor(opts: IdentityCacheOptions) {
    this.ttlMs = assertDidCacheTtl(opts.ttlMs ?? DEFAULT_DID_CACHE_TTL_MS);
    this.#max = opts.maxEntries ?? DEFAULT_DID_CACHE_ENTRIES;
    if (!Number.isSafeInteger(this.#max) || this.#max < 1)
      throw new IdentityCacheConfigError(`maxEntries must be a positive integer, got ${this.#max}`, {
        maxEntries: this.#max,
      });
    this.#now = opts.now ?? (() => performance.now());
  }

  get size(): number {
    return this.#entries.size;
  }

  async lookup(did: string, read: (did: string) => Promise<ResolvedIdentity>): Promise<IdentityLookup> {
    if (this.ttlMs === 0) return { identity: await read(did), fromCache: false };
    const hit = this.#entries.get(did);
    if (hit && this.#now() - hit.readAt < this.ttlMs) return { identity: hit.identity, fromCache: true };
    if (hit) this.#entries.delete(did);
    const shared = this.#reading.get(did);
    if (shared) return { identity: await shared, fromCache: false };
    const readAt = this.#now();
    const reading = read(did);
    this.#reading.set(did, reading);
    try {
      const identity = await reading;
      if (this.#reading.get(did) === reading) this.#store(did, { identity, readAt }); // not invalidated meanwhile
      return { identity, fromCache: false };
    } finally {
      if (this.#reading.get(did) === reading) this.#reading.delete(did);
    }
  }

  invalidate(did: string): void {
    this.#entries.delete(did);
    this.#reading.delete(did);
  }

  clear(): void {
    this.#entries.clear();
    this.#reading.clear();
  }

  #store(did: string, entry: Entry): void {
    this.#entries.delete(did); // re-inserted last: Map order is read order
    this.#entries.set(did, entry);
    while (this.#entries.size > this.#max) this.#entries.delete(this.#entries.keys().next().value!);
  }
}

export function createIdentityCache(opts: IdentityCacheOptions = {}): IdentityCache {
  return new TtlIdentityCache(opts);
}
