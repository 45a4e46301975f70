// Publishing client (used by `runlog publish` and by the runner for its own receipts): an authenticated
// session on one PDS that writes records and uploads blobs. Every answer is checked against what we sent:
// record CIDs and blob CIDs are recomputed locally and the blob mimeType must come back unchanged
// (at-run binds a code blob to its runtime through `application/<runtime-record-cid>`).

import { AtpAgent, XRPCError } from '@atproto/api';
import { cidForBlobBytes, cidForRecordJson, type JsonObject } from './cid.ts';
import { AtprotoError, atprotoValidationError } from './errors.ts';
import { formatAtUri, isValidNsid, isValidRecordKey } from './syntax.ts';
import type { StrongRef } from './collections.ts';

/** A blob reference as it appears in a record (atproto JSON). */
export interface BlobRef {
  $type: 'blob';
  ref: { $link: string };
  mimeType: string;
  size: number;
}

/** What is needed to resume a session without the password. */
export interface PublisherSession {
  pdsUrl: string;
  did: string;
  handle: string;
  accessJwt: string;
  refreshJwt: string;
}

export interface PutRecordOptions {
  /** Compare-and-swap: the CID the record must currently have (null: must not exist yet). */
  swapRecord?: string | null;
  /** Ask the PDS to validate against a lexicon it knows (default: the PDS decides). */
  validate?: boolean;
}

export interface Publisher {
  readonly did: string;
  readonly handle: string;
  readonly pdsUrl: string;
  /** The current tokens (they may have been refreshed since login). */
  session(): PublisherSession;
  /** putRecord when `rkey` is given, createRecord (server-chosen TID) when it is not. `$type` defaults to the collection. */
  putRecord(
    collection: string,
    rkey: string | undefined,
    record: JsonObject,
    opts?: PutRecordOptions,
  ): Promise<StrongRef>;
  deleteRecord(collection: string, rkey: string): Promise<void>;
  /** Uploads bytes with exactly this mimeType; returns the blob ref to put in a record. */
  uploadBlob(bytes: Uint8Array, mimeType: string): Promise<BlobRef>;
}

export type CreatePublisherOptions =
  | { pdsUrl: string; identifier: string; password: string }
  | { pdsUrl: string; session: Omit<PublisherSession, 'pdsUrl'> };

const MIME_RE = /^[a-zA-Z0-9!#$&^_.+-]{1,127}\/[a-zA-Z0-9!#$&^_.+-]{1,127}$/;

/** Logs in (identifier + password) or resumes a session, and returns a Publisher bound to that account. */
export async function createPublisher(opts: CreatePublisherOptions): Promise<Publisher> {
  const agent = new AtpAgent({ service: opts.pdsUrl });
  try {
    if ('password' in opts) {
      await agent.login({ identifier: opts.identifier, password: opts.password });
    } else {
      await agent.resumeSession({ ...opts.session, active: true });
    }
  } catch (err) {
    throw mapXrpcError(err, `could not sign in to ${opts.pdsUrl}`, true);
  }
  const current = () => {
    const s = agent.session;
    if (!s)
      throw new AtprotoError('PUBLISH_AUTH_FAILED', `the session on ${opts.pdsUrl} ended`, { pdsUrl: opts.pdsUrl });
    return s;
  };
  const did = current().did;
  const handle = current().handle;

  return {
    did,
    handle,
    pdsUrl: opts.pdsUrl,
    session() {
      const s = current();
      return { pdsUrl: opts.pdsUrl, did: s.did, handle: s.handle, accessJwt: s.accessJwt, refreshJwt: s.refreshJwt };
    },

    async putRecord(collection, rkey, record, putOpts = {}) {
      const issues: string[] = [];
      if (!isValidNsid(collection)) issues.push(`collection ${JSON.stringify(collection)} is not an NSID`);
      if (rkey !== undefined && !isValidRecordKey(rkey)) issues.push(`record key ${JSON.stringify(rkey)} is not valid`);
      if (record.$type !== undefined && record.$type !== collection)
        issues.push(`$type ${JSON.stringify(record.$type)} differs from the collection ${collection}`);
      if (issues.length > 0)
        throw atprotoValidationError('RECORD_FIELDS_INVALID', 'cannot publish this record', issues, {
          collection,
          rkey,
        });
      const full: JsonObject = { $type: collection, ...record };
      const localCid = cidForRecordJson(full); // also rejects values outside the data model (floats, bad $link…)
      let uri: string;
      let cid: string;
      try {
        if (rkey !== undefined) {
          const res = await agent.com.atproto.repo.putRecord({
            repo: did,
            collection,
            rkey,
            record: full,
            ...(putOpts.swapRecord !== undefined ? { swapRecord: putOpts.swapRecord } : {}),
            ...(putOpts.validate !== undefined ? { validate: putOpts.validate } : {}),
          } as Parameters<typeof agent.com.atproto.repo.putRecord>[0]);
          ({ uri, cid } = res.data);
        } else {
          const res = await agent.com.atproto.repo.createRecord({
            repo: did,
            collection,
            record: full,
            ...(putOpts.validate !== undefined ? { validate: putOpts.validate } : {}),
          });
          ({ uri, cid } = res.data);
        }
      } catch (err) {
        throw mapXrpcError(
          err,
          `could not write ${rkey ? formatAtUri(did, collection, rkey) : `a ${collection} record`}`,
          false,
        );
      }
      if (cid !== localCid) {
        throw new AtprotoError(
          'RECORD_CID_MISMATCH',
          `${uri}: the PDS stored ${cid}, the record we sent hashes to ${localCid}`,
          { uri, returned: cid, computed: localCid },
        );
      }
      return { uri, cid };
    },

    async deleteRecord(collection, rkey) {
      try {
        await agent.com.atproto.repo.deleteRecord({ repo: did, collection, rkey });
      } catch (err) {
        throw mapXrpcError(err, `could not delete ${formatAtUri(did, collection, rkey)}`, false);
      }
    },

    async uploadBlob(bytes, mimeType) {
      if (!MIME_RE.test(mimeType)) {
        throw atprotoValidationError(
          'RECORD_FIELDS_INVALID',
          `invalid mimeType ${JSON.stringify(mimeType)}`,
          ['must be type/subtype'],
          { mimeType },
        );
      }
      const localCid = cidForBlobBytes(bytes);
      let blob: { ref: { toString(): string }; mimeType: string; size: number };
      try {
        const res = await agent.com.atproto.repo.uploadBlob(bytes, { encoding: mimeType });
        blob = res.data.blob;
      } catch (err) {
        throw mapXrpcError(err, `could not upload a ${bytes.byteLength}-byte blob`, false);
      }
      const cid = blob.ref.toString();
      if (cid !== localCid) {
        throw new AtprotoError(
          'BLOB_CID_MISMATCH',
          `uploaded blob: the PDS says ${cid}, the bytes hash to ${localCid}`,
          { returned: cid, computed: localCid },
        );
      }
      if (blob.mimeType !== mimeType) {
        throw new AtprotoError(
          'BLOB_MIME_TYPE_CHANGED',
          `uploaded blob ${cid}: sent mimeType ${mimeType}, the PDS kept ${blob.mimeType}`,
          { cid, sent: mimeType, kept: blob.mimeType },
        );
      }
      if (blob.size !== bytes.byteLength) {
        throw new AtprotoError(
          'PUBLISH_FAILED',
          `uploaded blob ${cid}: sent ${bytes.byteLength} bytes, the PDS counted ${blob.size}`,
          { cid, sent: bytes.byteLength, counted: blob.size },
        );
      }
      return { $type: 'blob', ref: { $link: cid }, mimeType: blob.mimeType, size: blob.size };
    },
  };
}

function mapXrpcError(err: unknown, what: string, auth: boolean): AtprotoError {
  if (err instanceof AtprotoError) return err;
  if (err instanceof XRPCError) {
    const details = { status: err.status, error: err.error, message: err.message };
    if (err.status < 100 || err.status >= 500)
      return new AtprotoError('PDS_UNREACHABLE', `${what}: ${err.message}`, details, { cause: err });
    if (
      auth ||
      err.status === 401 ||
      err.error === 'AuthenticationRequired' ||
      err.error === 'ExpiredToken' ||
      err.error === 'InvalidToken'
    ) {
      return new AtprotoError('PUBLISH_AUTH_FAILED', `${what}: ${err.error}: ${err.message}`, details, { cause: err });
    }
    return new AtprotoError('PUBLISH_FAILED', `${what}: ${err.error}: ${err.message}`, details, { cause: err });
  }
  const e = err as Error;
  return new AtprotoError('PDS_UNREACHABLE', `${what}: ${e?.message ?? String(err)}`, {}, { cause: err });
}
