// Content identifiers computed independently of any PDS: records are dag-cbor (codec 0x71) and blobs are
// raw bytes (codec 0x55), both hashed with sha256 into a CIDv1. Records travel as atproto JSON
// ({"$link"}, {"$bytes"}, blob refs); jsonToIpld/ipldToJson convert between that and the IPLD data model.

import { createHash } from 'node:crypto';
import * as dagCbor from '@ipld/dag-cbor';
import { CID } from 'multiformats/cid';
import * as Digest from 'multiformats/hashes/digest';
import { atprotoValidationError } from './errors.ts';

export const DAG_CBOR_CODEC = 0x71;
export const RAW_CODEC = 0x55;
const SHA256_CODE = 0x12;

/** A JSON value as atproto serializes records over XRPC. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** The IPLD data model atproto allows (dag-cbor encodable, no floats). */
type IpldValue = null | boolean | number | string | Uint8Array | CID | IpldValue[] | { [key: string]: IpldValue };

export function sha256(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(bytes).digest());
}

export function sha256Hex(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

function cidV1(codec: number, bytes: Uint8Array): CID {
  return CID.createV1(codec, Digest.create(SHA256_CODE, sha256(bytes)));
}

/** CIDv1 (raw, sha256) of blob bytes, as a base32 string. */
export function cidForBlobBytes(bytes: Uint8Array): string {
  return cidV1(RAW_CODEC, bytes).toString();
}

/** CIDv1 (dag-cbor, sha256) of an already-encoded record block, as a base32 string. */
export function cidForCborBytes(bytes: Uint8Array): string {
  return cidV1(DAG_CBOR_CODEC, bytes).toString();
}

/** Canonical dag-cbor bytes of an atproto JSON record. Throws DATA_MODEL_INVALID listing every problem. */
export function encodeRecordJson(value: unknown): Uint8Array {
  return dagCbor.encode(jsonToIpld(value));
}

/** CIDv1 (dag-cbor, sha256) of an atproto JSON record (what com.atproto.repo.getRecord returns as `value`). */
export function cidForRecordJson(value: unknown): string {
  return cidForCborBytes(encodeRecordJson(value));
}

/** Decodes a dag-cbor record block into atproto JSON. */
export function decodeRecordCbor(bytes: Uint8Array): JsonObject {
  const decoded: unknown = dagCbor.decode(bytes);
  const json = ipldToJson(decoded);
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw atprotoValidationError('DATA_MODEL_INVALID', 'record block is not a map', ['top level is not a map']);
  }
  return json;
}

/** Parses a CID string; throws CID_INVALID. */
export function parseCid(s: string): CID {
  try {
    return CID.parse(s);
  } catch (err) {
    throw atprotoValidationError('CID_INVALID', `invalid CID ${JSON.stringify(s)}`, [(err as Error).message], {
      cid: s,
    });
  }
}

/** True when two CID strings denote the same CID (same version, codec and multihash). */
export function sameCid(a: string, b: string): boolean {
  try {
    return CID.parse(a).equals(CID.parse(b));
  } catch {
    return false;
  }
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);

/**
 * atproto JSON → IPLD data model, validating it on the way: top level is an object; no floats or unsafe
 * integers; `$link` / `$bytes` objects have exactly that one key and a valid value; `$type`, when present,
 * is a non-empty string; blob objects carry `ref` (a link), `mimeType` (string) and `size` (integer).
 */
export function jsonToIpld(value: unknown): IpldValue {
  const issues: string[] = [];
  if (!isPlainObject(value)) issues.push('top level: must be an object');
  const out = convert(value, '$', issues);
  if (issues.length > 0)
    throw atprotoValidationError('DATA_MODEL_INVALID', 'value is not in the atproto data model', issues);
  return out;
}

function convert(v: unknown, path: string, issues: string[]): IpldValue {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return v;
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) issues.push(`${path}: ${v} is not a safe integer (floats are not allowed)`);
    return v;
  }
  if (Array.isArray(v)) return v.map((x, i) => convert(x, `${path}[${i}]`, issues));
  if (!isPlainObject(v)) {
    issues.push(`${path}: ${typeof v} is not a JSON value`);
    return null;
  }
  const keys = Object.keys(v);
  if ('$link' in v) {
    const link = v.$link;
    if (keys.length !== 1) issues.push(`${path}: a $link object must have no other keys`);
    if (typeof link !== 'string') {
      issues.push(`${path}.$link: must be a string`);
      return null;
    }
    try {
      return CID.parse(link);
    } catch {
      issues.push(`${path}.$link: ${JSON.stringify(link)} is not a CID`);
      return null;
    }
  }
  if ('$bytes' in v) {
    const b64 = v.$bytes;
    if (keys.length !== 1) issues.push(`${path}: a $bytes object must have no other keys`);
    if (typeof b64 !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(b64)) {
      issues.push(`${path}.$bytes: must be a base64 string`);
      return null;
    }
    return new Uint8Array(Buffer.from(b64, 'base64'));
  }
  if ('$type' in v && (typeof v.$type !== 'string' || v.$type.length === 0))
    issues.push(`${path}.$type: must be a non-empty string`);
  if (v.$type === 'blob') {
    const ref = v.ref;
    if (!isPlainObject(ref) || typeof ref.$link !== 'string')
      issues.push(`${path}.ref: a blob needs a {"$link": cid} ref`);
    if (typeof v.mimeType !== 'string') issues.push(`${path}.mimeType: a blob needs a string mimeType`);
    if (typeof v.size !== 'number' || !Number.isSafeInteger(v.size) || v.size < 0)
      issues.push(`${path}.size: a blob needs an integer size`);
  }
  const out: { [key: string]: IpldValue } = {};
  for (const k of keys) {
    if (v[k] === undefined) continue;
    out[k] = convert(v[k], `${path}.${k}`, issues);
  }
  return out;
}

/** IPLD data model → atproto JSON ({"$link"} for CIDs, {"$bytes"} unpadded base64 for bytes). */
export function ipldToJson(v: unknown): JsonValue {
  if (v === null || typeof v === 'boolean' || typeof v === 'string' || typeof v === 'number') return v;
  if (v instanceof Uint8Array) return { $bytes: Buffer.from(v).toString('base64').replace(/=+$/, '') };
  const cid = CID.asCID(v);
  if (cid) return { $link: cid.toString() };
  if (Array.isArray(v)) return v.map(ipldToJson);
  if (typeof v === 'object') {
    const out: JsonObject = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[k] = ipldToJson(x);
    return out;
  }
  throw atprotoValidationError('DATA_MODEL_INVALID', `unexpected ${typeof v} in record`, [
    `${typeof v} is not in the data model`,
  ]);
}
