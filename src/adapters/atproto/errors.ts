// Errors the AT Protocol adapter throws on purpose. Each carries a stable `code` (RunlogError) so the
// execution actor can map it to a typed failure (`resolution`, `validation`) without parsing messages.

import { RunlogError, ValidationError } from '../../domain/errors.ts';

export type AtprotoErrorCode =
  | 'DID_RESOLUTION_FAILED' // no DID document, a malformed one, or one without #atproto_pds / #atproto
  | 'HANDLE_RESOLUTION_FAILED' // a handle did not resolve, or its DID document does not claim it back
  | 'PDS_UNREACHABLE' // network error, 5xx, or an answer that is not XRPC
  | 'NETWORK_TIMEOUT' // a read (connect, headers and body) did not finish within its deadline
  | 'DID_WEB_HOST_REFUSED' // did:web on a loopback or link-local host, which the operator did not allow
  | 'RECORD_NOT_FOUND' // the PDS says so (cid mode), or the signed MST proves absence (strict mode)
  | 'RECORD_CID_MISMATCH' // recomputed CID differs from the returned one, or from expectCid
  | 'RECORD_SIGNATURE_INVALID' // the commit is not signed by the DID document's #atproto key (or is another repo's)
  | 'RECORD_PROOF_INVALID' // the CAR does not prove the record under the signed commit's MST root
  | 'RECORD_INVALID' // not atproto data model, wrong $type, or the answer names another record
  | 'RECORD_TOO_LARGE'
  | 'BLOB_NOT_FOUND'
  | 'BLOB_CID_MISMATCH' // the bytes' raw sha256 CIDv1 differs from the one asked for
  | 'BLOB_TOO_LARGE'
  | 'BLOB_MIME_TYPE_CHANGED' // the PDS did not keep the mimeType we uploaded with
  | 'ALIAS_INVALID' // an alias record whose target is not a code record strong ref
  | 'URI_WRONG_COLLECTION' // e.g. resolveCodeUri given a URI that is neither code nor alias
  | 'PUBLISH_AUTH_FAILED'
  | 'PUBLISH_FAILED'
  | 'REPO_STREAM_ERROR' // the relay or PDS sent an error frame (FutureCursor, ConsumerTooSlow, …)
  | 'REPO_STREAM_FRAME_INVALID' // a frame of the repo event stream is not two DAG-CBOR objects of the known shapes
  | 'REPO_STREAM_UNAVAILABLE'; // the repo event stream could not be (re)connected within its attempts

export class AtprotoError extends RunlogError {
  declare readonly code: AtprotoErrorCode;
  constructor(
    code: AtprotoErrorCode,
    message: string,
    details?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(code, message, details, options);
  }
}

/** Syntax errors at the boundary (AT URI, DID, CID strings, records to publish) list every issue. */
export type AtprotoValidationCode =
  'AT_URI_INVALID' | 'DID_INVALID' | 'HANDLE_INVALID' | 'CID_INVALID' | 'DATA_MODEL_INVALID' | 'RECORD_FIELDS_INVALID';

export function atprotoValidationError(
  code: AtprotoValidationCode,
  message: string,
  issues: readonly string[],
  details?: Record<string, unknown>,
): ValidationError {
  return new ValidationError(code, message, issues, details);
}

export function isAtprotoError(err: unknown, code?: AtprotoErrorCode): err is AtprotoError {
  return err instanceof AtprotoError && (code === undefined || err.code === code);
}
