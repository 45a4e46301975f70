// X25519 keys for sealed secrets: public keys written as did:key, and a private key held so it cannot leak.
//
// A public key is `did:key:z<base58btc(0xec 0x01 ‖ 32 key bytes)>`: 0xec is the multicodec x25519-pub, written as
// the varint [0xec, 0x01]. Decoding is strict (prefix, multibase, multicodec, length, canonical spelling), because
// the string is compared as is between the runner's record, the secrets record and the key ring.
//
// The private key lives in a module-private WeakMap, not on the object: JSON.stringify, util.inspect, spreading and
// error details see only the public key. Agreement (`agree`) is the one use; the key ring alone asks for the bytes,
// to write them to its 0600 file. The curve is @noble/curves' audited X25519; this file holds no crypto of its own.
// It is domain code because it is pure (no IO): the npm libraries it imports are computation only.

import { x25519 } from '@noble/curves/ed25519.js';
import { base58btc } from 'multiformats/bases/base58';
import { EncryptionKeyInvalidError } from './secrets-errors.ts';

const DID_KEY_PREFIX = 'did:key:';
const X25519_PUB_VARINT = [0xec, 0x01] as const;
export const X25519_KEY_BYTES = 32;

/** The did:key of an X25519 public key (32 bytes). */
export function encodeX25519DidKey(publicKey: Uint8Array): string {
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== X25519_KEY_BYTES)
    throw new EncryptionKeyInvalidError([`an X25519 public key is ${X25519_KEY_BYTES} bytes`]);
  const bytes = new Uint8Array(2 + X25519_KEY_BYTES);
  bytes.set(X25519_PUB_VARINT, 0);
  bytes.set(publicKey, 2);
  return DID_KEY_PREFIX + base58btc.encode(bytes);
}

/** The 32 key bytes of an X25519 did:key; refuses anything else (ENCRYPTION_KEY_INVALID) with its reason. */
export function decodeX25519DidKey(didKey: unknown): Uint8Array {
  if (typeof didKey !== 'string') throw new EncryptionKeyInvalidError(['must be a string']);
  const shown = JSON.stringify(didKey.slice(0, 80));
  if (didKey.length > 256) throw new EncryptionKeyInvalidError([`${shown}… is longer than 256 characters`]);
  if (!didKey.startsWith(DID_KEY_PREFIX))
    throw new EncryptionKeyInvalidError([`${shown} does not start with did:key:`]);
  const multibase = didKey.slice(DID_KEY_PREFIX.length);
  if (!multibase.startsWith('z'))
    throw new EncryptionKeyInvalidError([`${shown} is not base58btc multibase (it must start with did:key:z)`]);
  let bytes: Uint8Array;
  try {
    bytes = base58btc.decode(multibase);
  } catch {
    throw new EncryptionKeyInvalidError([`${shown} is not valid base58btc`]);
  }
  if (bytes[0] !== X25519_PUB_VARINT[0] || bytes[1] !== X25519_PUB_VARINT[1])
    throw new EncryptionKeyInvalidError([`${shown} is not an x25519-pub key (multicodec 0xec)`]);
  if (bytes.length !== 2 + X25519_KEY_BYTES)
    throw new EncryptionKeyInvalidError([`${shown} holds ${bytes.length - 2} key bytes, not ${X25519_KEY_BYTES}`]);
  const key = bytes.slice(2);
  if (encodeX25519DidKey(key) !== didKey) throw new EncryptionKeyInvalidError([`${shown} is not in canonical form`]);
  return key;
}

/** True when `s` is an X25519 did:key. */
export function isX25519DidKey(s: unknown): s is string {
  try {
    decodeX25519DidKey(s);
    return true;
  } catch {
    return false;
  }
}

const secrets = new WeakMap<X25519PrivateKey, Uint8Array>();

/**
 * An X25519 private key that does not show itself: its bytes are held outside the object, so it serializes, prints
 * and spreads as its public key only.
 */
export class X25519PrivateKey {
  /** The matching public key as a did:key. */
  readonly publicKey: string;
  private constructor(secret: Uint8Array) {
    this.publicKey = encodeX25519DidKey(x25519.getPublicKey(secret));
    secrets.set(this, Uint8Array.from(secret));
    Object.freeze(this);
  }

  /** A fresh key from the platform's CSPRNG. */
  static generate(): X25519PrivateKey {
    return new X25519PrivateKey(x25519.utils.randomSecretKey());
  }

  /** A key from its 32 secret bytes (the key ring's file). */
  static fromBytes(secret: Uint8Array): X25519PrivateKey {
    if (!(secret instanceof Uint8Array) || secret.length !== X25519_KEY_BYTES)
      throw new EncryptionKeyInvalidError([`an X25519 private key is ${X25519_KEY_BYTES} bytes`]);
    return new X25519PrivateKey(secret);
  }

  /** The X25519 shared secret with a peer's public key (32 bytes); throws on a low-order peer key. */
  agree(peerPublicKey: Uint8Array): Uint8Array {
    return x25519.getSharedSecret(secrets.get(this)!, peerPublicKey);
  }

  toJSON(): { publicKey: string } {
    return { publicKey: this.publicKey };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `X25519PrivateKey { publicKey: '${this.publicKey}' }`;
  }
}

/** The secret bytes, for the key ring to write to its own 0600 file; nothing else should call this. */
export function exportX25519Secret(key: X25519PrivateKey): Uint8Array {
  return Uint8Array.from(secrets.get(key)!);
}
