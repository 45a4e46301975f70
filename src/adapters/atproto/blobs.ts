// Blob fetch: com.atproto.sync.getBlob from the author's PDS, size-capped, and accepted only when the
// bytes hash (sha256, CIDv1 raw 0x55) to exactly the CID asked for.

import { RAW_CODEC, cidForBlobBytes, parseCid } from './cid.ts';
import { AtprotoError, atprotoValidationError } from './errors.ts';
import { httpGet, xrpcError, xrpcUrl } from './http.ts';
import { resolveDid, type IdentityOptions, type ResolvedIdentity } from './identity.ts';
import { assertDid } from './syntax.ts';

export const DEFAULT_MAX_BLOB_BYTES = 64 * 1024 * 1024;

export interface FetchBlobOptions extends IdentityOptions {
  /** Cap on the blob size (default 64 MiB). Larger → BLOB_TOO_LARGE, and the download is abandoned. */
  maxBytes?: number;
  /** An identity already resolved for this DID (skips the DID document fetch). */
  identity?: ResolvedIdentity;
}

export interface FetchedBlob {
  did: string;
  cid: string;
  bytes: Uint8Array;
  size: number;
  /** The Content-Type the PDS served (informational; the record's blob ref is the authority). */
  contentType?: string;
  pdsEndpoint: string;
}

/** Fetches a blob and verifies its CID. Throws CID_INVALID, BLOB_NOT_FOUND, BLOB_TOO_LARGE, BLOB_CID_MISMATCH. */
export async function fetchBlob(did: string, cid: string, opts: FetchBlobOptions = {}): Promise<FetchedBlob> {
  assertDid(did);
  const wanted = parseCid(cid);
  if (wanted.version !== 1 || wanted.code !== RAW_CODEC || wanted.multihash.code !== 0x12) {
    throw atprotoValidationError(
      'CID_INVALID',
      `${cid} is not a blob CID (CIDv1, raw codec, sha256)`,
      ['expected CIDv1 raw sha256'],
      { cid },
    );
  }
  const identity = opts.identity && opts.identity.did === did ? opts.identity : await resolveDid(did, opts);
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BLOB_BYTES;
  const url = xrpcUrl(identity.pdsEndpoint, 'com.atproto.sync.getBlob', { did, cid: wanted.toString() });
  const res = await httpGet(url, {
    timeoutMs: opts.timeoutMs,
    deadlineAt: opts.deadlineAt,
    maxBytes,
    tooLarge: 'BLOB_TOO_LARGE',
    what: `blob ${cid} of ${did}`,
  });
  if (res.status !== 200) {
    const x = xrpcError(res.body);
    if (res.status === 400 || res.status === 404) {
      throw new AtprotoError('BLOB_NOT_FOUND', `blob ${cid} of ${did} not found${x.message ? ` (${x.message})` : ''}`, {
        did,
        cid,
        url,
        status: res.status,
        ...x,
      });
    }
    throw new AtprotoError('PDS_UNREACHABLE', `${url} answered HTTP ${res.status}`, {
      did,
      cid,
      url,
      status: res.status,
      ...x,
    });
  }
  const computed = cidForBlobBytes(res.body);
  if (computed !== wanted.toString()) {
    throw new AtprotoError(
      'BLOB_CID_MISMATCH',
      `blob ${cid} of ${did}: the ${res.body.byteLength} bytes served hash to ${computed}`,
      {
        did,
        cid,
        computed,
        size: res.body.byteLength,
      },
    );
  }
  const contentType = res.headers.get('content-type') ?? undefined;
  return {
    did,
    cid: computed,
    bytes: res.body,
    size: res.body.byteLength,
    ...(contentType ? { contentType } : {}),
    pdsEndpoint: identity.pdsEndpoint,
  };
}
