// The read-side port the execution actor uses: every network read of at-run needs, with options bound once.

import { resolveAlias, resolveCodeUri, type AliasOptions, type CodeUriResolution, type ResolvedAlias } from './aliases.ts';
import { fetchBlob, type FetchBlobOptions, type FetchedBlob } from './blobs.ts';
import { resolveDid, type IdentityOptions, type ResolvedIdentity } from './identity.ts';
import { fetchRecord, type FetchRecordOptions, type FetchedRecord, type RecordFetchMode } from './records.ts';

export interface AtprotoReaderOptions extends IdentityOptions {
  /** Default record fetch mode (default "strict"). */
  mode?: RecordFetchMode;
  handleResolverUrl?: string;
  maxRecordBytes?: number;
  maxBlobBytes?: number;
}

export interface AtprotoReader {
  resolveDid(did: string): Promise<ResolvedIdentity>;
  fetchRecord(uri: string, opts?: Pick<FetchRecordOptions, 'mode' | 'expectCid' | 'identity'>): Promise<FetchedRecord>;
  fetchBlob(did: string, cid: string, opts?: Pick<FetchBlobOptions, 'identity' | 'maxBytes'>): Promise<FetchedBlob>;
  resolveAlias(uri: string): Promise<ResolvedAlias>;
  resolveCodeUri(uri: string): Promise<CodeUriResolution>;
}

export function createAtprotoReader(opts: AtprotoReaderOptions = {}): AtprotoReader {
  const identity: IdentityOptions = {
    ...(opts.plcUrl !== undefined ? { plcUrl: opts.plcUrl } : {}),
    ...(opts.didWebAllowHttpLoopback !== undefined ? { didWebAllowHttpLoopback: opts.didWebAllowHttpLoopback } : {}),
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
  };
  const recordOpts: AliasOptions = {
    ...identity,
    mode: opts.mode ?? 'strict',
    ...(opts.handleResolverUrl !== undefined ? { handleResolverUrl: opts.handleResolverUrl } : {}),
    ...(opts.maxRecordBytes !== undefined ? { maxBytes: opts.maxRecordBytes } : {}),
  };
  return {
    resolveDid: (did) => resolveDid(did, identity),
    fetchRecord: (uri, o = {}) => fetchRecord(uri, { ...recordOpts, ...o }),
    fetchBlob: (did, cid, o = {}) => fetchBlob(did, cid, { ...identity, ...(opts.maxBlobBytes !== undefined ? { maxBytes: opts.maxBlobBytes } : {}), ...o }),
    resolveAlias: (uri) => resolveAlias(uri, recordOpts),
    resolveCodeUri: (uri) => resolveCodeUri(uri, recordOpts),
  };
}
