// One sealed box: bytes sealed to an X25519 public key, shared by sealed secrets and sealed job results.
//
// A fresh ephemeral X25519 key pair per box; key = HKDF-SHA256(X25519(ephemeral, recipient), salt = ephemeralPub ‖
// recipientPub, info), 32 bytes; the bytes are sealed with XChaCha20-Poly1305 under a random 24-byte nonce and the
// caller's associated data. `info` and the associated data are the caller's, so a secret and a result never open as
// each other. Every primitive is @noble's audited code; this file only composes them, and it is pure (no IO).

import { xchacha20poly1305 } from '@noble/ciphers/chacha.js';
import { randomBytes } from '@noble/ciphers/utils.js';
import { x25519 } from '@noble/curves/ed25519.js';
import { hkdf } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { EncryptionKeyInvalidError } from './secrets-errors.ts';
import { encodeX25519DidKey, type X25519PrivateKey } from './x25519-keys.ts';

export const SEAL_NONCE_BYTES = 24;
export const SEAL_TAG_BYTES = 16;
const KEY_BYTES = 32;
const encoder = new TextEncoder();

/** What one box holds, nothing of it secret: the ephemeral public key, the nonce, the ciphertext and its tag. */
export interface SealedBox {
  ephemeralKey: Uint8Array;
  nonce: Uint8Array;
  ciphertext: Uint8Array;
}

/** How a box is bound: the HKDF info (its kind) and the associated data (what it belongs to). */
export interface SealBinding {
  info: Uint8Array;
  aad: Uint8Array;
}

/** Length-prefixed UTF-8 fields (a 4-byte big-endian length before each), so no two field lists encode alike. */
export function lengthPrefixed(fields: readonly string[]): Uint8Array {
  const parts = fields.map((f) => encoder.encode(f));
  const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.length, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const p of parts) {
    view.setUint32(at, p.length);
    out.set(p, at + 4);
    at += 4 + p.length;
  }
  return out;
}

function boxKey(shared: Uint8Array, ephemeralPub: Uint8Array, recipientPub: Uint8Array, info: Uint8Array) {
  const salt = new Uint8Array(ephemeralPub.length + recipientPub.length);
  salt.set(ephemeralPub, 0);
  salt.set(recipientPub, ephemeralPub.length);
  return hkdf(sha256, shared, salt, info, KEY_BYTES);
}

/** Any scalar: a low-order point gives the same refusal whatever the scalar (noble checks the point itself). */
const PROBE_SCALAR = new Uint8Array(32).fill(0x42);

/** False for a low-order point: X25519 with it gives no secret, so nothing can be sealed to it. */
export function isUsableX25519PublicKey(publicKey: Uint8Array): boolean {
  try {
    x25519.getSharedSecret(PROBE_SCALAR, publicKey);
    return true;
  } catch {
    return false;
  }
}

/** Seals `plaintext` to `recipientPub`; ENCRYPTION_KEY_INVALID when the key is a low-order point. */
export function sealBox(recipientPub: Uint8Array, plaintext: Uint8Array, bound: SealBinding): SealedBox {
  const ephemeral = x25519.utils.randomSecretKey();
  const ephemeralPub = x25519.getPublicKey(ephemeral);
  let shared: Uint8Array;
  try {
    shared = x25519.getSharedSecret(ephemeral, recipientPub);
  } catch {
    throw new EncryptionKeyInvalidError([`${encodeX25519DidKey(recipientPub)} is a low-order point, not a usable key`]);
  } finally {
    ephemeral.fill(0);
  }
  const key = boxKey(shared, ephemeralPub, recipientPub, bound.info);
  shared.fill(0);
  const nonce = randomBytes(SEAL_NONCE_BYTES);
  const ciphertext = xchacha20poly1305(key, nonce, bound.aad).encrypt(plaintext);
  key.fill(0);
  return { ephemeralKey: ephemeralPub, nonce, ciphertext };
}

/**
 * The plaintext of a box sealed to `key` (whose public key is `recipientPub`). Throws, saying nothing of why, when
 * it does not open: another key, another binding, or altered bytes; callers turn that into their own typed refusal.
 */
export function openBox(
  key: X25519PrivateKey,
  recipientPub: Uint8Array,
  box: SealedBox,
  bound: SealBinding,
): Uint8Array {
  const shared = key.agree(box.ephemeralKey);
  const k = boxKey(shared, box.ephemeralKey, recipientPub, bound.info);
  shared.fill(0);
  try {
    return xchacha20poly1305(k, box.nonce, bound.aad).decrypt(box.ciphertext);
  } finally {
    k.fill(0);
  }
}
