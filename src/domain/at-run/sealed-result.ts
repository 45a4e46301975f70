// A job's result sealed to the caller's key: the job names an X25519 public key (`resultKey`, a did:key), and the
// runner uploads the result blob as a sealed envelope only that key's holder can open.
//
// The envelope is UTF-8 JSON, its MIME type SEALED_RESULT_MIME_TYPE, with exactly these fields:
//
//   v             1
//   alg           "x25519-xchacha20poly1305"
//   recipientKey  the job's resultKey (did:key), so a caller can tell which of its keys opens it
//   epk           the ephemeral X25519 public key, 32 bytes
//   nonce         24 bytes
//   ct            XChaCha20-Poly1305 ciphertext of the exact result JSON bytes, with its 16-byte tag
//
// Byte fields are standard base64 (RFC 4648, no padding). key = HKDF-SHA256(X25519(ephemeral, recipient), salt =
// epk ‖ recipientPub, info = HKDF_INFO), 32 bytes (x25519-seal.ts, the box sealed secrets use, with its own info).
// The associated data is length-prefixed (4-byte big-endian length before each UTF-8 field): AAD_LABEL, alg, the
// job's URI, the job's CID, recipientKey; so an envelope moved to another job's receipt does not open. The receipt's
// outputSha256 is the hash of the envelope, never of the plaintext (a public hash confirms a guessed result); the
// AEAD tag proves the plaintext to the key's holder. Pure: no IO.

import { EncryptionKeyInvalidError, ResultUnsealableError } from './secrets-errors.ts';
import { X25519_KEY_BYTES, decodeX25519DidKey, type X25519PrivateKey } from './x25519-keys.ts';
import {
  SEAL_NONCE_BYTES,
  SEAL_TAG_BYTES,
  isUsableX25519PublicKey,
  lengthPrefixed,
  openBox,
  sealBox,
  type SealBinding,
} from './x25519-seal.ts';

/** The MIME type of a sealed result blob; a result in clear is application/json. */
export const SEALED_RESULT_MIME_TYPE = 'application/vnd.at-run.sealed+json';
export const SEALED_RESULT_VERSION = 1;
export const SEALED_RESULT_ALGORITHM = 'x25519-xchacha20poly1305';

const encoder = new TextEncoder();
const HKDF_INFO = encoder.encode(
  'dev.mainasara.at-run.beta.v2.execution/result/v1 hkdf-sha256 x25519-xchacha20poly1305',
);
const AAD_LABEL = 'dev.mainasara.at-run.beta.v2.execution/result/v1 aad';
const ENVELOPE_KEYS = ['v', 'alg', 'recipientKey', 'epk', 'nonce', 'ct'];
const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;

/** Standard base64 without padding; Buffer's codec, as multiformats' is far slower on a large result. */
const toBase64 = (b: Uint8Array): string =>
  Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64').replace(/=+$/, '');

/** The sealed result's envelope, as its blob holds it (JSON). */
export interface SealedResultEnvelope {
  v: typeof SEALED_RESULT_VERSION;
  alg: typeof SEALED_RESULT_ALGORITHM;
  recipientKey: string;
  epk: string;
  nonce: string;
  ct: string;
}

/** The job a result answers (its strong ref): the envelope is bound to it. */
export interface ResultJob {
  uri: string;
  cid: string;
}

function binding(job: ResultJob, recipientKey: string): SealBinding {
  return { info: HKDF_INFO, aad: lengthPrefixed([AAD_LABEL, SEALED_RESULT_ALGORITHM, job.uri, job.cid, recipientKey]) };
}

/** Why `key` cannot be a job's resultKey (not an X25519 did:key, or a low-order point); empty when it can. */
export function resultKeyIssues(key: unknown): string[] {
  let pub: Uint8Array;
  try {
    pub = decodeX25519DidKey(key);
  } catch (err) {
    if (err instanceof EncryptionKeyInvalidError) return [...err.issues];
    throw err;
  }
  return isUsableX25519PublicKey(pub) ? [] : [`${key as string} is a low-order point, not a usable key`];
}

/**
 * The result bytes sealed to `recipientKey` for `job`: the envelope's JSON bytes, to upload as
 * SEALED_RESULT_MIME_TYPE. ENCRYPTION_KEY_INVALID when the key is not one nothing can be sealed to.
 */
export function sealResult(result: Uint8Array, recipientKey: string, job: ResultJob): Uint8Array {
  const box = sealBox(decodeX25519DidKey(recipientKey), result, binding(job, recipientKey));
  const envelope: SealedResultEnvelope = {
    v: SEALED_RESULT_VERSION,
    alg: SEALED_RESULT_ALGORITHM,
    recipientKey,
    epk: toBase64(box.ephemeralKey),
    nonce: toBase64(box.nonce),
    ct: toBase64(box.ciphertext),
  };
  return encoder.encode(JSON.stringify(envelope));
}

function bytesOf(v: unknown, field: string, length: (n: number) => boolean, size: string): Uint8Array {
  const bytes = typeof v === 'string' && BASE64_RE.test(v) ? new Uint8Array(Buffer.from(v, 'base64')) : null;
  if (!bytes || !length(bytes.length)) throw new ResultUnsealableError(`its ${field} is not ${size} of base64`);
  return bytes;
}

function parseEnvelope(sealed: Uint8Array): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(sealed));
  } catch {
    throw new ResultUnsealableError('it is not a JSON envelope');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ResultUnsealableError('it is not a JSON object');
  const e = value as Record<string, unknown>;
  const unknown = Object.keys(e).filter((k) => !ENVELOPE_KEYS.includes(k));
  if (unknown.length > 0) throw new ResultUnsealableError(`it has fields no envelope has: ${unknown.join(', ')}`);
  if (e.v !== SEALED_RESULT_VERSION)
    throw new ResultUnsealableError(`its version ${JSON.stringify(e.v)} is not ${SEALED_RESULT_VERSION}`);
  if (e.alg !== SEALED_RESULT_ALGORITHM)
    throw new ResultUnsealableError(`its algorithm ${JSON.stringify(e.alg)} is not ${SEALED_RESULT_ALGORITHM}`);
  return e;
}

/**
 * The result bytes of an envelope sealed to `key` for `job`; RESULT_UNSEALABLE, saying why, when it is malformed,
 * sealed to another key, or does not open (altered, or sealed for another job). Checking the bytes against the
 * receipt's outputSha256 is the caller's.
 */
export function openResult(sealed: Uint8Array, key: X25519PrivateKey, job: ResultJob): Uint8Array {
  const e = parseEnvelope(sealed);
  if (e.recipientKey !== key.publicKey)
    throw new ResultUnsealableError(
      `it is sealed to ${JSON.stringify(e.recipientKey)}, not to ${key.publicKey}, the key this caller holds`,
      { sealedTo: e.recipientKey, held: key.publicKey },
    );
  const box = {
    ephemeralKey: bytesOf(e.epk, 'epk', (n) => n === X25519_KEY_BYTES, `${X25519_KEY_BYTES} bytes`),
    nonce: bytesOf(e.nonce, 'nonce', (n) => n === SEAL_NONCE_BYTES, `${SEAL_NONCE_BYTES} bytes`),
    ciphertext: bytesOf(e.ct, 'ct', (n) => n >= SEAL_TAG_BYTES, `at least ${SEAL_TAG_BYTES} bytes`),
  };
  try {
    return openBox(key, decodeX25519DidKey(key.publicKey), box, binding(job, key.publicKey));
  } catch {
    throw new ResultUnsealableError(
      `it fails authentication with ${key.publicKey}: it was altered, or sealed for another job than ${job.uri}`,
      { held: key.publicKey, job: job.uri },
    );
  }
}
