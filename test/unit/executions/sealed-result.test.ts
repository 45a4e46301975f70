// Sealed job results, pure: the envelope a runner uploads when a job names a resultKey, opened by the key's holder
// only, for that job only; every refusal is RESULT_UNSEALABLE and none shows the result.
import { describe, expect, it } from 'vitest';
import { RunlogError } from '../../../src/domain/errors.ts';
import {
  SEALED_RESULT_ALGORITHM,
  SEALED_RESULT_MIME_TYPE,
  openResult,
  resultKeyIssues,
  sealResult,
} from '../../../src/domain/at-run/sealed-result.ts';
import { SECRETS_NSID, sealEntries } from '../../../src/domain/at-run/sealed-secrets.ts';
import { encodeX25519DidKey, X25519PrivateKey } from '../../../src/domain/at-run/x25519-keys.ts';

const CALLER = 'did:plc:caller000000000000000000';
const JOB = {
  uri: `at://${CALLER}/dev.mainasara.at-run.beta.v2.job/3kjob`,
  cid: 'bafyreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku',
};
const PLAINTEXT = '{"greeting":"Hello, Ada!","secret":"the-result-in-clear"}';
const result = () => new TextEncoder().encode(PLAINTEXT);

/** What a thrown error says, and its code; the test fails when nothing is thrown. */
function refusal(fn: () => unknown): { code: string; text: string } {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof RunlogError)) throw err;
    return { code: err.code, text: `${err.message} ${JSON.stringify(err)}` };
  }
  throw new Error('expected a refusal');
}

const envelopeOf = (bytes: Uint8Array) =>
  JSON.parse(Buffer.from(bytes).toString('utf8')) as Record<string, unknown> & {
    epk: string;
    nonce: string;
    ct: string;
  };
const bytesOf = (e: unknown) => new TextEncoder().encode(JSON.stringify(e));
const flip = (b64: string): string => {
  const bytes = Buffer.from(b64, 'base64');
  bytes[0] = bytes[0]! ^ 0x01;
  return bytes.toString('base64').replace(/=+$/, '');
};

describe('a sealed result', () => {
  it('is a JSON envelope of the documented fields, and opens with the key it is sealed to', () => {
    const key = X25519PrivateKey.generate();
    const sealed = sealResult(result(), key.publicKey, JOB);
    const e = envelopeOf(sealed);
    expect(Object.keys(e)).toEqual(['v', 'alg', 'recipientKey', 'epk', 'nonce', 'ct']);
    expect(e).toMatchObject({ v: 1, alg: SEALED_RESULT_ALGORITHM, recipientKey: key.publicKey });
    expect(Buffer.from(e.epk, 'base64')).toHaveLength(32);
    expect(Buffer.from(e.nonce, 'base64')).toHaveLength(24);
    expect(Buffer.from(e.ct, 'base64')).toHaveLength(result().length + 16);
    expect(e.epk).not.toMatch(/=$/);
    expect(SEALED_RESULT_MIME_TYPE).toBe('application/vnd.at-run.sealed+json');
    expect(Buffer.from(openResult(sealed, key, JOB)).toString('utf8')).toBe(PLAINTEXT);
  });

  it('does not hold the result in clear, nor the same bytes twice', () => {
    const key = X25519PrivateKey.generate();
    const a = Buffer.from(sealResult(result(), key.publicKey, JOB));
    const b = Buffer.from(sealResult(result(), key.publicKey, JOB));
    for (const needle of ['the-result-in-clear', 'Hello', Buffer.from(PLAINTEXT).toString('base64').slice(0, 16)])
      expect(a.includes(needle), needle).toBe(false);
    expect(a.equals(b)).toBe(false);
  });

  it('seals an empty result and a large one', () => {
    const key = X25519PrivateKey.generate();
    for (const bytes of [new Uint8Array(0), new Uint8Array(256 * 1024).fill(0x61)])
      expect(openResult(sealResult(bytes, key.publicKey, JOB), key, JOB)).toEqual(bytes);
  });

  it('does not open with another key, even when the envelope is relabelled to it', () => {
    const key = X25519PrivateKey.generate();
    const other = X25519PrivateKey.generate();
    const sealed = sealResult(result(), key.publicKey, JOB);
    const wrong = refusal(() => openResult(sealed, other, JOB));
    expect(wrong.code).toBe('RESULT_UNSEALABLE');
    expect(wrong.text).toContain(`sealed to "${key.publicKey}", not to ${other.publicKey}`);
    const relabelled = bytesOf({ ...envelopeOf(sealed), recipientKey: other.publicKey });
    const forged = refusal(() => openResult(relabelled, other, JOB));
    expect(forged.code).toBe('RESULT_UNSEALABLE');
    expect(forged.text).toContain('fails authentication');
  });

  it('does not open for another job (another record, or another version of it)', () => {
    const key = X25519PrivateKey.generate();
    const sealed = sealResult(result(), key.publicKey, JOB);
    for (const job of [
      { ...JOB, uri: `at://${CALLER}/dev.mainasara.at-run.beta.v2.job/3kother` },
      { ...JOB, cid: 'bafyreidfhyhfl6zzfjjbmbtdwmeklhcxpg4jhkkc6ylfsppmbijvbw2wle' },
    ])
      expect(refusal(() => openResult(sealed, key, job))).toMatchObject({ code: 'RESULT_UNSEALABLE' });
  });

  it('refuses an altered ciphertext, nonce or ephemeral key, without the result in the refusal', () => {
    const key = X25519PrivateKey.generate();
    const e = envelopeOf(sealResult(result(), key.publicKey, JOB));
    for (const field of ['ct', 'nonce', 'epk'] as const) {
      const r = refusal(() => openResult(bytesOf({ ...e, [field]: flip(e[field]) }), key, JOB));
      expect(r.code, field).toBe('RESULT_UNSEALABLE');
      expect(r.text).not.toContain('the-result-in-clear');
      expect(r.text).not.toContain('Hello');
    }
  });

  it('refuses a malformed envelope, saying what is wrong', () => {
    const key = X25519PrivateKey.generate();
    const e = envelopeOf(sealResult(result(), key.publicKey, JOB));
    const cases: [Uint8Array, string][] = [
      [new TextEncoder().encode(PLAINTEXT), 'fields no envelope has: greeting, secret'],
      [new TextEncoder().encode('not json'), 'not a JSON envelope'],
      [new Uint8Array([0xff, 0xfe]), 'not a JSON envelope'],
      [bytesOf([e]), 'not a JSON object'],
      [bytesOf({ ...e, v: 2 }), 'version 2 is not 1'],
      [bytesOf({ ...e, alg: 'none' }), 'algorithm "none"'],
      [bytesOf({ ...e, epk: e.epk.slice(4) }), 'epk is not 32 bytes'],
      [bytesOf({ ...e, nonce: 'not base64!' }), 'nonce is not 24 bytes'],
      [bytesOf({ ...e, ct: '' }), 'ct is not at least 16 bytes'],
    ];
    for (const [bytes, says] of cases) {
      const r = refusal(() => openResult(bytes, key, JOB));
      expect(r.code, says).toBe('RESULT_UNSEALABLE');
      expect(r.text, says).toContain(says);
    }
  });

  it('is not a sealed secret: a secrets entry moved into an envelope does not open', () => {
    const key = X25519PrivateKey.generate();
    const record = sealEntries({
      recordUri: `at://${CALLER}/${SECRETS_NSID}/s1`,
      runner: 'did:plc:runner0000000000000000000',
      recipientKey: key.publicKey,
      entries: [{ name: 'RESULT', value: PLAINTEXT }],
    });
    const entry = record.entries[0]!;
    const moved = bytesOf({
      v: 1,
      alg: SEALED_RESULT_ALGORITHM,
      recipientKey: key.publicKey,
      epk: entry.ephemeralKey.$bytes,
      nonce: entry.nonce.$bytes,
      ct: entry.ciphertext.$bytes,
    });
    expect(refusal(() => openResult(moved, key, JOB)).code).toBe('RESULT_UNSEALABLE');
  });

  it('is sealed only to a usable X25519 did:key', () => {
    const lowOrder = encodeX25519DidKey(new Uint8Array(32));
    expect(refusal(() => sealResult(result(), 'did:key:z6Mk', JOB)).code).toBe('ENCRYPTION_KEY_INVALID');
    const low = refusal(() => sealResult(result(), lowOrder, JOB));
    expect(low).toMatchObject({ code: 'ENCRYPTION_KEY_INVALID' });
    expect(low.text).toContain('low-order point');
  });
});

describe('resultKeyIssues', () => {
  it('accepts an X25519 did:key, and says why anything else is not one', () => {
    expect(resultKeyIssues(X25519PrivateKey.generate().publicKey)).toEqual([]);
    expect(resultKeyIssues(42)).toEqual(['must be a string']);
    expect(resultKeyIssues('did:plc:caller000000000000000000')[0]).toContain('does not start with did:key:');
    // An Ed25519 did:key is a signing key, not an X25519 one.
    expect(resultKeyIssues('did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK')[0]).toContain('x25519-pub');
    const lowOrder = encodeX25519DidKey(new Uint8Array(32));
    expect(resultKeyIssues(lowOrder)).toEqual([`${lowOrder} is a low-order point, not a usable key`]);
  });
});
