// AT Protocol adapter for at-run V2. Everything exported here is plain data and functions of our own
// types: no @atproto/* type crosses this boundary.

export { AT_RUN_V2, type AtRunV2Collection, type StrongRef } from './collections.ts';
export { AtprotoError, isAtprotoError, type AtprotoErrorCode, type AtprotoValidationCode } from './errors.ts';
export {
  assertDid,
  formatAtUri,
  isValidDid,
  isValidHandle,
  isValidNsid,
  isValidRecordKey,
  parseAtUri,
  parseRecordUri,
  type AtUri,
  type RecordUri,
} from './syntax.ts';
export {
  cidForBlobBytes,
  cidForCborBytes,
  cidForRecordJson,
  decodeRecordCbor,
  encodeRecordJson,
  sameCid,
  sha256Hex,
  type JsonObject,
  type JsonValue,
} from './cid.ts';
export {
  DEFAULT_PLC_URL,
  didDocumentUrl,
  parseDidDocument,
  resolveAuthority,
  resolveDid,
  resolveHandle,
  type HandleOptions,
  type IdentityOptions,
  type ResolvedIdentity,
} from './identity.ts';
export {
  DEFAULT_MAX_RECORD_BYTES,
  fetchRecord,
  verifyRecordJson,
  verifyRecordProof,
  type FetchRecordOptions,
  type FetchedRecord,
  type RecordFetchMode,
  type RecordTarget,
} from './records.ts';
export { DEFAULT_MAX_BLOB_BYTES, fetchBlob, type FetchBlobOptions, type FetchedBlob } from './blobs.ts';
export {
  buildAliasRecord,
  parseAliasRecord,
  resolveAlias,
  resolveCodeUri,
  type AliasOptions,
  type AliasRecord,
  type CodeUriResolution,
  type ResolvedAlias,
} from './aliases.ts';
export {
  createPublisher,
  type BlobRef,
  type CreatePublisherOptions,
  type PutRecordOptions,
  type Publisher,
  type PublisherSession,
} from './publisher.ts';
export {
  buildExecutionRecord,
  buildNotRunRecord,
  buildRunnerRecord,
  putRunnerRecord,
  writeExecutionReceipt,
  writeNotRunReceipt,
  type ExecutionFailureKind,
  type ExecutionLimits,
  type ExecutionOutcome,
  type ExecutionEgress,
  type ExecutionReceipt,
  type NotRunReceipt,
  type RunnerPolicy,
} from './receipts.ts';
export {
  assertDidCacheTtl,
  createIdentityCache,
  DEFAULT_DID_CACHE_TTL_MS,
  MAX_DID_CACHE_TTL_MS,
  type IdentityCache,
  type IdentityCacheOptions,
  type IdentityLookup,
} from './identity-cache.ts';
export { httpObservers, type HttpObservation } from './http.ts';
export { createAtprotoReader, type AtprotoReader, type AtprotoReaderOptions } from './reader.ts';
export { requireDevEnv, startLocalNetwork, type LocalAccount, type LocalNetwork } from './local-network.ts';
export {
  createsOf,
  jobCreatesOf,
  openRepoStream,
  RepoStreamError,
  subscribeReposUrl,
  webSocketFactory,
  type CreatedRecord,
  type RepoOp,
  type RepoOpAction,
  type RepoStream,
  type RepoStreamCounters,
  type RepoStreamMessage,
  type RepoStreamOptions,
  type StreamSocket,
  type StreamSocketFactory,
  type StreamSocketHandlers,
  type StreamTimers,
} from './repo-stream.ts';
export { cborItemEnd, decodeRepoStreamFrame, type RepoStreamFrame } from './repo-stream-frames.ts';
