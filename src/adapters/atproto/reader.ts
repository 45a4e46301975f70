// The read-side port the execution actor uses: every network read of at-run needs, with options bound once.
//
// The reader keeps one IdentityCache (identity-cache.ts): the DID → DID document step may be served from it for
// up to `didCacheTtlMs`. Records, proofs, signatures, blobs and aliases are read and verified on every call.

import {
  resolveAlias,
  resolveCodeUri,
  type AliasOptions,
  type CodeUriResolution,
  type ResolvedAlias,
} from './aliases.ts';
import { fetchBlob, type FetchBlobOptions, type FetchedBlob } from './blobs.ts';
import { AT_RUN_V2 } from './collections.ts';
import { isAtprotoError, type AtprotoErrorCode } from './errors.ts';
import { deadlineError } from './http.ts';
import { createIdentityCache, DEFAULT_DID_CACHE_TTL_MS, type IdentityCache } from './identity-cache.ts';
import { resolveDid, type IdentityOptions, type ResolvedIdentity } from './identity.ts';
import { fetchRecord, type FetchRecordOptions, type FetchedRecord, type RecordFetchMode } from './records.ts';
import { parseRecordUri } from './syntax.ts';

export interface AtprotoReaderOptions extends IdentityOptions {
  /** Default record fetch mode (default "strict"). */
  mode?: RecordFetchMode;
  handleResolverUrl?: string;
  maxRecordBytes?: number;
  maxBlobBytes?: number;
  /**
   * How long a DID document (PDS endpoint, signing key) is reused, in ms; 0 reads it on every lookup.
   * Default DEFAULT_DID_CACHE_TTL_MS (30 s). See identity-cache.ts for what this trades.
   */
  didCacheTtlMs?: number;
}

export interface AtprotoReader {
  /** The DID's identity, from the DID document cache while fresh. */
  resolveDid(did: string): Promise<ResolvedIdentity>;
  /** Every read below takes `deadlineAt` (epoch ms): no read, DID document included, outlives it (NETWORK_TIMEOUT). */
  fetchRecord(
    uri: string,
    opts?: Pick<FetchRecordOptions, 'mode' | 'expectCid' | 'identity' | 'deadlineAt'>,
  ): Promise<FetchedRecord>;
  fetchBlob(
    did: string,
    cid: string,
    opts?: Pick<FetchBlobOptions, 'identity' | 'maxBytes' | 'deadlineAt'>,
  ): Promise<FetchedBlob>;
  resolveAlias(uri: string, opts?: Deadline): Promise<ResolvedAlias>;
  resolveCodeUri(uri: string, opts?: Deadline): Promise<CodeUriResolution>;
  /** The DID document cache this reader uses (tests and operators can inspect or clear it). */
  readonly identities: IdentityCache;
}

/**
 * Failures a DID document that changed since it was cached would explain: the key was rotated (the commit is
 * signed by the new key), the account moved (the old PDS no longer has the repo or the blob, or is gone).
 * They are retried once with a freshly read document; any other failure is the answer.
 */
const STALE_SYMPTOMS: ReadonlySet<AtprotoErrorCode> = new Set([
  'RECORD_SIGNATURE_INVALID',
  'RECORD_NOT_FOUND',
  'BLOB_NOT_FOUND',
  'PDS_UNREACHABLE',
]);

interface Deadline {
  deadlineAt?: number;
}

/**
 * A DID document read may be shared by several callers (the cache joins concurrent misses), so it runs under its
 * own read deadline; each caller stops waiting for it at its own deadline. The timer is a plain strong one.
 */
function bounded<T>(p: Promise<T>, deadlineAt: number | undefined, what: string): Promise<T> {
  if (deadlineAt === undefined) return p;
  const left = Math.floor(deadlineAt - Date.now());
  if (left <= 0) {
    p.catch(() => undefined);
    return Promise.reject(deadlineError(what, 'DID document', 0, 'execution'));
  }
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(deadlineError(what, 'DID document', left, 'execution')), left);
  });
  return Promise.race([p, expired]).finally(() => clearTimeout(timer));
}

const sameIdentity = (a: ResolvedIdentity, b: ResolvedIdentity): boolean =>
  a.pdsEndpoint === b.pdsEndpoint && a.signingKey === b.signingKey;

export function createAtprotoReader(opts: AtprotoReaderOptions = {}): AtprotoReader {
  const identity: IdentityOptions = {
    ...(opts.plcUrl !== undefined ? { plcUrl: opts.plcUrl } : {}),
    ...(opts.didWebAllowHttpLoopback !== undefined ? { didWebAllowHttpLoopback: opts.didWebAllowHttpLoopback } : {}),
    ...(opts.didWebAllowLoopback !== undefined ? { didWebAllowLoopback: opts.didWebAllowLoopback } : {}),
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
  };
  const recordOpts: AliasOptions = {
    ...identity,
    mode: opts.mode ?? 'strict',
    ...(opts.handleResolverUrl !== undefined ? { handleResolverUrl: opts.handleResolverUrl } : {}),
    ...(opts.maxRecordBytes !== undefined ? { maxBytes: opts.maxRecordBytes } : {}),
  };
  const cache = createIdentityCache({ ttlMs: opts.didCacheTtlMs ?? DEFAULT_DID_CACHE_TTL_MS });
  const read = (did: string) => resolveDid(did, identity);

  /**
   * Runs `use` with the DID's identity from the cache. A handle authority (no DID) or a disabled cache leaves
   * resolution to `use` itself. A stale-looking failure on a cached document is retried with a fresh one.
   */
  async function withIdentity<T>(
    did: string | undefined,
    use: (identity: ResolvedIdentity | undefined) => Promise<T>,
    deadlineAt?: number,
  ): Promise<T> {
    if (did === undefined || cache.ttlMs === 0) return use(undefined);
    const lookup = () => bounded(cache.lookup(did, read), deadlineAt, did);
    const first = await lookup();
    try {
      return await use(first.identity);
    } catch (err) {
      if (!first.fromCache || !isAtprotoError(err) || !STALE_SYMPTOMS.has(err.code)) throw err;
      cache.invalidate(did);
      const fresh = await lookup();
      if (sameIdentity(fresh.identity, first.identity)) throw err; // the document did not change: a real failure
      return use(fresh.identity);
    }
  }
  const didOf = (uri: string): string | undefined => parseRecordUri(uri).did;

  return {
    identities: cache,
    resolveDid: async (did) => (await cache.lookup(did, read)).identity,
    // A caller-given identity is used as is (the caller resolved it); otherwise the cache supplies one.
    fetchRecord: async (uri, o = {}) =>
      o.identity !== undefined
        ? fetchRecord(uri, { ...recordOpts, ...o })
        : withIdentity(
            didOf(uri),
            (id) => fetchRecord(uri, { ...recordOpts, ...o, ...(id ? { identity: id } : {}) }),
            o.deadlineAt,
          ),
    fetchBlob: async (did, cid, o = {}) => {
      const base = { ...identity, ...(opts.maxBlobBytes !== undefined ? { maxBytes: opts.maxBlobBytes } : {}), ...o };
      return o.identity !== undefined
        ? fetchBlob(did, cid, base)
        : withIdentity(did, (id) => fetchBlob(did, cid, { ...base, ...(id ? { identity: id } : {}) }), o.deadlineAt);
    },
    resolveAlias: async (uri, o = {}) =>
      withIdentity(
        didOf(uri),
        (id) => resolveAlias(uri, { ...recordOpts, ...o, ...(id ? { identity: id } : {}) }),
        o.deadlineAt,
      ),
    // A code URI needs no network; only an alias URI reads a record (with its own authority's identity).
    resolveCodeUri: async (uri, o = {}) => {
      const parsed = parseRecordUri(uri);
      const did = parsed.collection === AT_RUN_V2.alias ? parsed.did : undefined;
      return withIdentity(
        did,
        (id) => resolveCodeUri(uri, { ...recordOpts, ...o, ...(id ? { identity: id } : {}) }),
        o.deadlineAt,
      );
    },
  };
}
