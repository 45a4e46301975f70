// AT Protocol syntax the at-run record validators need (DID, AT URI of a record, CID, datetime). The domain
// may not import adapters, so these are small local checks; the adapter in src/adapters/atproto remains the
// authority for resolving anything over the network.

import { CID } from 'multiformats/cid';

const DID_RE = /^did:[a-z]+:[a-zA-Z0-9._:%-]*[a-zA-Z0-9._-]$/;
const RKEY_RE = /^[a-zA-Z0-9_~.:-]{1,512}$/;
// RFC 3339 as the atproto datetime syntax restricts it: upper-case T and Z, seconds required, no -00:00.
const DATETIME_RE =
  /^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-6][0-9]:[0-6][0-9](\.[0-9]{1,20})?(Z|[+-][0-2][0-9]:[0-5][0-9])$/;

/** The multicodec codes of the CIDs at-run records carry. */
export const DAG_CBOR_CODEC = 0x71;
export const RAW_CODEC = 0x55;
const SHA2_256 = 0x12;

export function isDid(s: unknown): s is string {
  return typeof s === 'string' && s.length <= 2048 && DID_RE.test(s);
}

export function isDatetime(s: unknown): s is string {
  return (
    typeof s === 'string' &&
    s.length <= 64 &&
    DATETIME_RE.test(s) &&
    !s.endsWith('-00:00') &&
    !Number.isNaN(Date.parse(s))
  );
}

/** `at://<did>/<collection>/<rkey>` naming one record of `collection`; returns the DID and rkey. */
export function parseRecordUriOf(uri: unknown, collection: string): { did: string; rkey: string } | null {
  if (typeof uri !== 'string' || uri.length > 8192 || !uri.startsWith('at://')) return null;
  const parts = uri.slice(5).split('/');
  if (parts.length !== 3) return null;
  const [did, coll, rkey] = parts as [string, string, string];
  if (!isDid(did) || coll !== collection || !RKEY_RE.test(rkey) || rkey === '.' || rkey === '..') return null;
  return { did, rkey };
}

/**
 * Problems with a CID string: it must parse, be CIDv1 with the given codec and a sha2-256 multihash, and be
 * written in its canonical form (base32 lower case), so two spellings of one CID cannot both pass equality
 * checks such as `mimeType == application/<cid>`.
 */
export function cidIssues(value: unknown, codec: number): string[] {
  if (typeof value !== 'string') return ['must be a CID string'];
  let cid: CID;
  try {
    cid = CID.parse(value);
  } catch {
    return [`${JSON.stringify(value.slice(0, 100))} is not a CID`];
  }
  const issues: string[] = [];
  if (cid.version !== 1) issues.push('must be a CIDv1');
  if (cid.code !== codec)
    issues.push(
      `must use codec 0x${codec.toString(16)} (${codec === DAG_CBOR_CODEC ? 'dag-cbor' : 'raw'}), not 0x${cid.code.toString(16)}`,
    );
  if (cid.multihash.code !== SHA2_256) issues.push('must use a sha2-256 multihash');
  if (issues.length === 0 && cid.toString() !== value)
    issues.push(`must be written in canonical base32 form (${cid.toString()})`);
  return issues;
}

/** A blob ref's `ref` as JSON (`{ $link }`) or as a decoded CID object; the CID string or null. */
export function blobRefLink(ref: unknown): string | null {
  if (typeof ref !== 'object' || ref === null) return null;
  const asCid = CID.asCID(ref);
  if (asCid) return asCid.toString();
  const link = (ref as Record<string, unknown>).$link;
  return typeof link === 'string' && Object.keys(ref).length === 1 ? link : null;
}
