// The code blob of an execution, fetched and validated early: started as soon as the code record is verified
// (it names the blob CID and the entrypoint), so the download, the CID check and the archive validation overlap
// the runtime record's fetch and the appends in between; the materialize effect takes the result.
//
// It is a latency cache, not state: nothing is recorded from it until materialize uses it, and an execution
// whose prefetch is gone (a supervisor restart between resolve and materialize) simply fetches again. Every
// check still runs on the bytes that are used: blob CID, archive validation, the fresh re-written archive.

export interface PreparedCode {
  /** The blob's CID (verified against the bytes) and its size. */
  cid: string;
  size: number;
  /** Entries in the validated archive. */
  entries: number;
  /** A freshly written archive of the validated entries, relative to the code root. */
  archive: Buffer;
  /** Taken from the verified-code cache (bytes fetched, CID-checked and validated by an earlier run). */
  reused?: boolean;
}

/**
 * Code archives already fetched, CID-verified and validated, by author, blob CID and entrypoint: a run whose
 * (freshly verified) code record names the same blob CID uses them instead of downloading it again. Bounded by
 * count and bytes, least recently used first out.
 */
export class VerifiedCodeCache {
  readonly #entries = new Map<string, PreparedCode>();
  #bytes = 0;
  constructor(
    private readonly maxEntries = 64,
    private readonly maxBytes = 64 * 1024 * 1024,
  ) {}

  get(key: string): PreparedCode | null {
    const hit = this.#entries.get(key);
    if (!hit) return null;
    this.#entries.delete(key);
    this.#entries.set(key, hit); // most recently used last
    return { ...hit, reused: true };
  }

  set(key: string, code: PreparedCode): void {
    if (code.archive.length > this.maxBytes) return;
    const old = this.#entries.get(key);
    if (old) this.#bytes -= old.archive.length;
    this.#entries.delete(key);
    this.#entries.set(key, { ...code, reused: false });
    this.#bytes += code.archive.length;
    for (const [k, v] of this.#entries) {
      if (this.#entries.size <= this.maxEntries && this.#bytes <= this.maxBytes) break;
      this.#entries.delete(k);
      this.#bytes -= v.archive.length;
    }
  }

  get size(): number {
    return this.#entries.size;
  }
}

export class CodePrefetch {
  readonly #pending = new Map<string, { key: string; prepared: Promise<PreparedCode> }>();

  /**
   * Starts preparing the code of `executionId` (replacing an earlier attempt's). `key` names what the result
   * depends on (blob CID, entrypoint): take() hands it out only for the same key.
   */
  start(executionId: string, key: string, prepare: () => Promise<PreparedCode>): void {
    const prepared = prepare();
    prepared.catch(() => undefined); // observed by take(); a prefetch nobody takes must not be an unhandled rejection
    this.#pending.set(executionId, { key, prepared });
  }

  /** The prepared code (or its failure), once; null when nothing was started for this execution and key. */
  take(executionId: string, key: string): Promise<PreparedCode> | null {
    const p = this.#pending.get(executionId);
    this.#pending.delete(executionId);
    return p && p.key === key ? p.prepared : null;
  }

  /** Forgets an execution's prefetch (it failed before materializing, or was cancelled). */
  drop(executionId: string): void {
    this.#pending.delete(executionId);
  }

  get size(): number {
    return this.#pending.size;
  }
}
