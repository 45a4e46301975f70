// Record fetch with verification.
//   strict (default): com.atproto.sync.getRecord returns a CAR holding the signed commit, the MST nodes on
//     the path to the key, and the record block. The commit must belong to the DID and be signed by the DID
//     document's #atproto key; the MST under the commit's `data` root must map collection/rkey to the record
//     block's CID. A PDS cannot forge a record without the account's signing key.
//   cid: com.atproto.repo.getRecord (JSON); the record's CID is recomputed (dag-cbor, sha256, CIDv1 0x71)
//     and must equal the one returned (and expectCid). This proves self-consistency only: a PDS that lies
//     consistently (other value, its matching CID) passes unless the caller pins expectCid.

import { MST, MemoryBlockstore, def, formatDataKey, readCarWithRoot, verifyCommitSig } from '@atproto/repo';
import { cidForCborBytes, cidForRecordJson, decodeRecordCbor, parseCid, sameCid, type JsonObject } from './cid.ts';
import { AtprotoError } from './errors.ts';
import { httpGet, parseJsonBody, xrpcError, xrpcUrl, type HttpResult } from './http.ts';
import { resolveAuthority, type IdentityOptions, type ResolvedIdentity } from './identity.ts';
import { formatAtUri, parseAtUri, parseRecordUri } from './syntax.ts';

export type RecordFetchMode = 'strict' | 'cid';

export const DEFAULT_MAX_RECORD_BYTES = 2 * 1024 * 1024;

export interface FetchRecordOptions extends IdentityOptions {
  mode?: RecordFetchMode;
  /** The CID the caller expects (a strong ref). Any other current CID → RECORD_CID_MISMATCH. */
  expectCid?: string;
  /** Cap on the response body (CAR or JSON). Default 2 MiB. */
  maxBytes?: number;
  /** Needed only for AT URIs whose authority is a handle: a service answering resolveHandle. */
  handleResolverUrl?: string;
  /** An identity already resolved for this URI's DID (skips the DID document fetch). */
  identity?: ResolvedIdentity;
}

export interface FetchedRecord {
  /** at://<did>/<collection>/<rkey> (a handle authority is replaced by the DID). */
  uri: string;
  cid: string;
  value: JsonObject;
  mode: RecordFetchMode;
  /** strict mode: the signed commit the proof was checked under. */
  commit?: { cid: string; rev: string };
  /** The PDS the record came from. */
  pdsEndpoint: string;
}

export interface RecordTarget {
  did: string;
  collection: string;
  rkey: string;
  /** did:key of the repo's #atproto signing key. */
  signingKey: string;
}

/** Fetches and verifies one record. See the file comment for what each mode proves. */
export async function fetchRecord(uri: string, opts: FetchRecordOptions = {}): Promise<FetchedRecord> {
  const parsed = parseRecordUri(uri);
  if (opts.expectCid !== undefined) parseCid(opts.expectCid);
  // A pre-resolved identity is used only when it is the URI's authority (same DID, or the handle it claims).
  const given = opts.identity;
  const matches =
    given !== undefined && (parsed.did !== undefined ? given.did === parsed.did : given.handle === parsed.handle);
  const identity = matches ? given : await resolveAuthority(parsed, opts);
  const target: RecordTarget = {
    did: identity.did,
    collection: parsed.collection,
    rkey: parsed.rkey,
    signingKey: identity.signingKey,
  };
  const canonical = formatAtUri(target.did, target.collection, target.rkey);
  const mode = opts.mode ?? 'strict';
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_RECORD_BYTES;

  let result: { cid: string; value: JsonObject; commit?: { cid: string; rev: string } };
  if (mode === 'strict') {
    const url = xrpcUrl(identity.pdsEndpoint, 'com.atproto.sync.getRecord', {
      did: target.did,
      collection: target.collection,
      rkey: target.rkey,
    });
    const res = await httpGet(url, {
      timeoutMs: opts.timeoutMs,
      deadlineAt: opts.deadlineAt,
      maxBytes,
      tooLarge: 'RECORD_TOO_LARGE',
      what: `record proof for ${canonical}`,
      accept: 'application/vnd.ipld.car',
    });
    assertFound(res, url, canonical);
    result = await verifyRecordProof(res.body, target);
  } else if (mode === 'cid') {
    const url = xrpcUrl(identity.pdsEndpoint, 'com.atproto.repo.getRecord', {
      repo: target.did,
      collection: target.collection,
      rkey: target.rkey,
    });
    const res = await httpGet(url, {
      timeoutMs: opts.timeoutMs,
      deadlineAt: opts.deadlineAt,
      maxBytes,
      tooLarge: 'RECORD_TOO_LARGE',
      what: `record ${canonical}`,
      accept: 'application/json',
    });
    assertFound(res, url, canonical);
    result = verifyRecordJson(parseJsonBody(res, url, `record ${canonical}`), target);
  } else {
    throw new AtprotoError('RECORD_INVALID', `unknown record fetch mode ${JSON.stringify(mode)}`, { mode });
  }

  if (opts.expectCid !== undefined && !sameCid(result.cid, opts.expectCid)) {
    throw new AtprotoError(
      'RECORD_CID_MISMATCH',
      `${canonical} is now ${result.cid}, not the expected ${opts.expectCid}`,
      {
        uri: canonical,
        cid: result.cid,
        expectCid: opts.expectCid,
      },
    );
  }
  return { uri: canonical, ...result, mode, pdsEndpoint: identity.pdsEndpoint };
}

function assertFound(res: HttpResult, url: string, uri: string): void {
  if (res.status === 200) return;
  const x = xrpcError(res.body);
  if (
    (res.status === 400 || res.status === 404) &&
    (x.error === 'RecordNotFound' ||
      x.error === 'RepoNotFound' ||
      x.error === 'RepoTakendown' ||
      x.error === 'RepoDeactivated' ||
      x.error === 'RepoSuspended' ||
      res.status === 404)
  ) {
    throw new AtprotoError(
      'RECORD_NOT_FOUND',
      `${uri} not found${x.error ? ` (${x.error}${x.message ? `: ${x.message}` : ''})` : ''}`,
      { uri, url, status: res.status, ...x },
    );
  }
  throw new AtprotoError('PDS_UNREACHABLE', `${url} answered HTTP ${res.status}${x.error ? ` (${x.error})` : ''}`, {
    uri,
    url,
    status: res.status,
    ...x,
  });
}

/**
 * Verifies a com.atproto.sync.getRecord CAR against the repo's DID and signing key and returns the record.
 * Pure (no IO). RECORD_SIGNATURE_INVALID: the commit is another repo's or its signature does not verify.
 * RECORD_PROOF_INVALID: malformed CAR, a block whose bytes do not hash to its CID, or an MST path / record
 * block missing. RECORD_NOT_FOUND: the signed MST proves the key is absent.
 */
export async function verifyRecordProof(
  car: Uint8Array,
  target: RecordTarget,
): Promise<{ cid: string; value: JsonObject; commit: { cid: string; rev: string } }> {
  const uri = formatAtUri(target.did, target.collection, target.rkey);
  const proofInvalid = (reason: string, cause?: unknown) =>
    new AtprotoError(
      'RECORD_PROOF_INVALID',
      `record proof for ${uri} is invalid: ${reason}`,
      { uri, reason },
      cause === undefined ? undefined : { cause },
    );

  const { root, blocks } = await attempt(
    () => readCarWithRoot(car), // also checks that every block's bytes hash to its CID
    (err) => proofInvalid(`not a CAR with one root and valid blocks (${err.message})`, err),
  );
  const rootBytes = blocks.get(root);
  if (!rootBytes || cidForCborBytes(rootBytes) !== root.toString())
    throw proofInvalid('commit block missing or not matching its CID');
  const store = new MemoryBlockstore(blocks);
  const commit = await attempt(
    () => store.readObj(root, def.commit),
    (err) => proofInvalid(`root block is not a version 3 commit (${err.message})`, err),
  );
  if (commit.did !== target.did) {
    throw new AtprotoError(
      'RECORD_SIGNATURE_INVALID',
      `record proof for ${uri} carries a commit of ${String(commit.did)}, not of ${target.did}`,
      { uri, commitDid: commit.did },
    );
  }
  let signed = false;
  try {
    signed = await verifyCommitSig(commit, target.signingKey);
  } catch {
    signed = false;
  }
  if (!signed) {
    throw new AtprotoError(
      'RECORD_SIGNATURE_INVALID',
      `commit ${root.toString()} of ${target.did} is not signed by its #atproto key ${target.signingKey}`,
      {
        uri,
        commit: root.toString(),
        signingKey: target.signingKey,
      },
    );
  }
  const commitInfo = { cid: root.toString(), rev: String(commit.rev) };
  const leaf = await attempt(
    () => MST.load(store, commit.data).get(formatDataKey(target.collection, target.rkey)),
    (err) => proofInvalid(`the MST path to ${target.collection}/${target.rkey} is incomplete (${err.message})`, err),
  );
  if (!leaf) {
    throw new AtprotoError(
      'RECORD_NOT_FOUND',
      `${uri} does not exist (absence proven under commit ${commitInfo.cid}, rev ${commitInfo.rev})`,
      { uri, commit: commitInfo },
    );
  }
  const cid = leaf.toString();
  const bytes = blocks.get(leaf);
  if (!bytes) throw proofInvalid(`the signed MST points at ${cid} but the CAR does not hold that block`);
  if (cidForCborBytes(bytes) !== cid) throw proofInvalid(`the record block does not hash to ${cid}`);
  let value: JsonObject;
  try {
    value = decodeRecordCbor(bytes);
  } catch (err) {
    throw new AtprotoError(
      'RECORD_INVALID',
      `${uri}: record block is not a dag-cbor map (${(err as Error).message})`,
      { uri, cid },
      { cause: err },
    );
  }
  assertType(value, target.collection, uri);
  return { cid, value, commit: commitInfo };
}

/** Checks a com.atproto.repo.getRecord answer: names the asked record, and its value hashes to its cid. */
export function verifyRecordJson(
  body: unknown,
  target: Omit<RecordTarget, 'signingKey'>,
): { cid: string; value: JsonObject } {
  const uri = formatAtUri(target.did, target.collection, target.rkey);
  if (typeof body !== 'object' || body === null)
    throw new AtprotoError('RECORD_INVALID', `${uri}: answer is not an object`, { uri });
  const b = body as Record<string, unknown>;
  if (
    typeof b.uri !== 'string' ||
    typeof b.cid !== 'string' ||
    typeof b.value !== 'object' ||
    b.value === null ||
    Array.isArray(b.value)
  ) {
    throw new AtprotoError('RECORD_INVALID', `${uri}: answer lacks uri, cid or value`, { uri });
  }
  let answered;
  try {
    answered = parseAtUri(b.uri);
  } catch (err) {
    throw new AtprotoError(
      'RECORD_INVALID',
      `${uri}: answer names an invalid uri ${JSON.stringify(b.uri)}`,
      { uri },
      { cause: err },
    );
  }
  if (answered.did !== target.did || answered.collection !== target.collection || answered.rkey !== target.rkey) {
    throw new AtprotoError('RECORD_INVALID', `asked for ${uri}, the PDS answered ${b.uri}`, { uri, answered: b.uri });
  }
  const value = b.value as JsonObject;
  let computed: string;
  try {
    computed = cidForRecordJson(value);
  } catch (err) {
    throw new AtprotoError(
      'RECORD_INVALID',
      `${uri}: value is not in the atproto data model (${(err as Error).message})`,
      { uri },
      { cause: err },
    );
  }
  if (!sameCid(computed, b.cid)) {
    throw new AtprotoError('RECORD_CID_MISMATCH', `${uri}: the PDS says ${b.cid}, the value hashes to ${computed}`, {
      uri,
      returned: b.cid,
      computed,
    });
  }
  assertType(value, target.collection, uri);
  return { cid: computed, value };
}

async function attempt<T>(fn: () => Promise<T>, onError: (err: Error) => Error): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw onError(err instanceof Error ? err : new Error(String(err)));
  }
}

function assertType(value: JsonObject, collection: string, uri: string): void {
  if (value.$type !== collection) {
    throw new AtprotoError('RECORD_INVALID', `${uri}: $type is ${JSON.stringify(value.$type)}, not ${collection}`, {
      uri,
      $type: value.$type ?? null,
    });
  }
}
