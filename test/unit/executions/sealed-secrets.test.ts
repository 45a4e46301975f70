// Sealed secrets, pure: did:key encoding of X25519 keys, sealing and opening a secrets record, and every refusal
// openEntries gives (another key, a retired key, tampering, another code, another runner, a moved entry, bad
// records), each without the plaintext in its message.
import { inspect } from 'node:util';
import { lexicons } from '@atproto/api';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { base58btc } from 'multiformats/bases/base58';
import { describe, expect, it } from 'vitest';
import { RunlogError } from '../../../src/domain/errors.ts';
import {
  openEntries,
  sealEntries,
  SECRETS_NSID,
  type OpenContext,
  type SecretsRecord,
} from '../../../src/domain/at-run/sealed-secrets.ts';
import { SecretsKeyRetiredError, SecretsKeyUnknownError } from '../../../src/domain/at-run/secrets-errors.ts';
import { decodeX25519DidKey, encodeX25519DidKey, X25519PrivateKey } from '../../../src/domain/at-run/x25519-keys.ts';

const RUNNER = 'did:plc:runner0000000000000000000';
const OTHER_RUNNER = 'did:plc:other00000000000000000000';
const AUTHOR = 'did:plc:author0000000000000000000';
const CODE = 'at://did:plc:coder00000000000000000000/dev.mainasara.at-run.beta.v2.code/3kabc';
const OTHER_CODE = 'at://did:plc:coder00000000000000000000/dev.mainasara.at-run.beta.v2.code/3kzzz';
const RECORD_URI = `at://${AUTHOR}/${SECRETS_NSID}/s1`;
const SECRET = 'hunter2-the-plaintext-value';

/** What a thrown error says, and its code; the test fails when nothing is thrown. */
function refusal(fn: () => unknown): { code: string; text: string } {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof RunlogError)) throw err;
    return { code: err.code, text: `${err.message} ${JSON.stringify(err)} ${inspect(err)}` };
  }
  throw new Error('expected a refusal');
}

function setup(opts: { retiresAt?: string } = {}) {
  const key = X25519PrivateKey.generate();
  const keyFor: OpenContext['keyFor'] = (pub, now) => {
    if (pub !== key.publicKey) throw new SecretsKeyUnknownError(pub);
    if (opts.retiresAt && now.getTime() >= Date.parse(opts.retiresAt))
      throw new SecretsKeyRetiredError(pub, opts.retiresAt);
    return key;
  };
  const ctx: OpenContext = { recordUri: RECORD_URI, runnerDid: RUNNER, codeUri: CODE, keyFor, now: new Date() };
  const seal = (extra: Partial<Parameters<typeof sealEntries>[0]> = {}) =>
    sealEntries({
      recordUri: RECORD_URI,
      runner: RUNNER,
      recipientKey: key.publicKey,
      code: CODE,
      entries: [
        { name: 'API_TOKEN', value: SECRET },
        { name: 'DB_PASSWORD', value: 'pässwörd ✓' },
      ],
      ...extra,
    });
  return { key, ctx, seal };
}

const flip = (b64: string): string => {
  const bytes = Buffer.from(b64, 'base64');
  bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0x01;
  return bytes.toString('base64').replace(/=+$/, '');
};

describe('X25519 keys as did:key', () => {
  it('encode as did:key:z with the x25519-pub multicodec and decode back to the same bytes', () => {
    const pub = new Uint8Array(32).map((_, i) => i);
    const did = encodeX25519DidKey(pub);
    expect(did.startsWith('did:key:z6LS')).toBe(true);
    expect(base58btc.decode(did.slice('did:key:'.length)).slice(0, 2)).toEqual(new Uint8Array([0xec, 0x01]));
    expect(decodeX25519DidKey(did)).toEqual(pub);
  });

  it('refuse garbage, other key types, wrong lengths and non-canonical spellings', () => {
    const pub = new Uint8Array(32).fill(7);
    const ed25519 = new Uint8Array([0xed, 0x01, ...pub]);
    const short = new Uint8Array([0xec, 0x01, ...pub.slice(0, 31)]);
    for (const bad of [
      42,
      '',
      'did:web:example.com',
      'did:key:',
      'did:key:mAAAA',
      'did:key:z0OIl',
      `did:key:${base58btc.encode(ed25519)}`,
      `did:key:${base58btc.encode(short)}`,
      `${encodeX25519DidKey(pub)} `,
      `did:key:z${'1'.repeat(300)}`,
    ])
      expect(refusal(() => decodeX25519DidKey(bad)).code).toBe('ENCRYPTION_KEY_INVALID');
  });

  it('hold a private key that JSON, util.inspect, spreading and Object.keys do not show', () => {
    const key = X25519PrivateKey.generate();
    const other = X25519PrivateKey.generate();
    const secretHex = Buffer.from(other.agree(decodeX25519DidKey(key.publicKey))).toString('hex');
    const shown = [JSON.stringify(key), inspect(key, { showHidden: true, depth: 5 }), JSON.stringify({ ...key })];
    expect(Object.keys(key)).toEqual(['publicKey']);
    for (const s of shown) {
      expect(s).toContain(key.publicKey);
      expect(s).not.toContain(secretHex);
    }
    // Agreement is symmetric: what each side derives is the same secret.
    expect(Buffer.from(key.agree(decodeX25519DidKey(other.publicKey))).toString('hex')).toBe(secretHex);
  });
});

describe('sealEntries and openEntries', () => {
  it('round-trip every value for the runner, code and record they were sealed for', () => {
    const { ctx, seal } = setup();
    const record = seal();
    expect(record.algorithm).toBe('x25519-xchacha20poly1305');
    expect(record.entries.map((e) => e.name)).toEqual(['API_TOKEN', 'DB_PASSWORD']);
    expect(Buffer.from(record.entries[0]!.nonce.$bytes, 'base64')).toHaveLength(24);
    expect(record.entries[0]!.ephemeralKey.$bytes).not.toBe(record.entries[1]!.ephemeralKey.$bytes);
    expect(JSON.stringify(record)).not.toContain(SECRET);
    expect(JSON.stringify(record)).not.toContain(Buffer.from(SECRET).toString('base64').slice(0, 12));
    expect({ ...openEntries(record, ctx) }).toEqual({ API_TOKEN: SECRET, DB_PASSWORD: 'pässwörd ✓' });
  });

  it('write records the secrets lexicon accepts', () => {
    const doc = JSON.parse(
      readFileSync(join(import.meta.dirname, '../../../lexicons/dev.mainasara.at-run.beta.v2.secrets.json'), 'utf8'),
    ) as never;
    if (!lexicons.getDef(SECRETS_NSID)) lexicons.add(doc);
    const r = setup().seal();
    const asLex = {
      ...r,
      entries: r.entries.map((e) => ({
        name: e.name,
        ephemeralKey: Buffer.from(e.ephemeralKey.$bytes, 'base64'),
        nonce: Buffer.from(e.nonce.$bytes, 'base64'),
        ciphertext: Buffer.from(e.ciphertext.$bytes, 'base64'),
      })),
    };
    expect(() => lexicons.assertValidRecord(SECRETS_NSID, asLex)).not.toThrow();
  });

  it('open records with no code restriction for any code, and refuse a restricted one for another code', () => {
    const { ctx, seal } = setup();
    const { code: _code, ...unrestricted } = seal();
    const open = seal({ code: undefined });
    expect(Object.keys(openEntries(open, { ...ctx, codeUri: OTHER_CODE }))).toEqual(['API_TOKEN', 'DB_PASSWORD']);
    // Removing the restriction from a restricted record does not help: the code is bound into every entry.
    expect(refusal(() => openEntries(unrestricted, ctx)).code).toBe('SECRETS_TAMPERED');
    expect(refusal(() => openEntries(seal(), { ...ctx, codeUri: OTHER_CODE })).code).toBe('SECRETS_CODE_MISMATCH');
  });

  it('accept a record restricted to the alias the execution was named by', () => {
    const { ctx, seal } = setup();
    const alias = 'at://did:plc:coder00000000000000000000/dev.mainasara.at-run.beta.v2.alias/latest';
    const r = seal({ code: alias });
    expect(openEntries(r, { ...ctx, aliasUri: alias }).API_TOKEN).toBe(SECRET);
    expect(refusal(() => openEntries(r, ctx)).code).toBe('SECRETS_CODE_MISMATCH');
  });

  it('refuse a record addressed to another runner, and one whose runner field was rewritten', () => {
    const { ctx, seal } = setup();
    expect(refusal(() => openEntries(seal({ runner: OTHER_RUNNER }), ctx)).code).toBe('SECRETS_RUNNER_MISMATCH');
    const rewritten = { ...seal({ runner: OTHER_RUNNER }), runner: RUNNER };
    expect(refusal(() => openEntries(rewritten, ctx)).code).toBe('SECRETS_TAMPERED');
  });

  it('refuse values sealed to a key this runner does not hold', () => {
    const { ctx } = setup();
    const stranger = X25519PrivateKey.generate();
    const r = sealEntries({
      recordUri: RECORD_URI,
      runner: RUNNER,
      recipientKey: stranger.publicKey,
      code: CODE,
      entries: [{ name: 'API_TOKEN', value: SECRET }],
    });
    const got = refusal(() => openEntries(r, ctx));
    expect(got.code).toBe('SECRETS_KEY_UNKNOWN');
    expect(got.text).not.toContain(SECRET);
  });

  it('open values sealed to a retiring key before its retire date and refuse them after it', () => {
    const retiresAt = '2030-01-01T00:00:00.000Z';
    const { ctx, seal } = setup({ retiresAt });
    const r = seal();
    expect(openEntries(r, { ...ctx, now: new Date('2029-12-31T23:59:59Z') }).API_TOKEN).toBe(SECRET);
    expect(refusal(() => openEntries(r, { ...ctx, now: new Date('2030-01-01T00:00:01Z') })).code).toBe(
      'SECRETS_KEY_RETIRED',
    );
  });

  it('refuse tampered ciphertext, nonces and ephemeral keys without saying the value', () => {
    const { ctx, seal } = setup();
    for (const field of ['ciphertext', 'nonce', 'ephemeralKey'] as const) {
      const r = seal();
      const e = r.entries[0]!;
      e[field] = { $bytes: flip(e[field].$bytes) };
      const got = refusal(() => openEntries(r, ctx));
      expect(got.code).toBe('SECRETS_TAMPERED');
      expect(got.text).toContain('API_TOKEN');
      expect(got.text).not.toContain(SECRET);
    }
  });

  it('refuse an entry moved to another name, or copied into another record', () => {
    const { ctx, seal } = setup();
    const r = seal();
    const swapped: SecretsRecord = {
      ...r,
      entries: [
        { ...r.entries[0]!, name: 'DB_PASSWORD' },
        { ...r.entries[1]!, name: 'API_TOKEN' },
      ],
    };
    expect(refusal(() => openEntries(swapped, ctx)).code).toBe('SECRETS_TAMPERED');
    const elsewhere = `at://did:plc:thief00000000000000000000/${SECRETS_NSID}/s1`;
    expect(refusal(() => openEntries(r, { ...ctx, recordUri: elsewhere })).code).toBe('SECRETS_TAMPERED');
  });

  it('refuse malformed records, listing every problem', () => {
    const { ctx, seal } = setup();
    const r = seal();
    const cases: unknown[] = [
      null,
      { ...r, algorithm: 'rot13' },
      { ...r, entries: [r.entries[0], r.entries[0]] },
      { ...r, entries: [{ ...r.entries[0], name: '1BAD' }] },
      { ...r, entries: [{ ...r.entries[0], name: 'A-B' }] },
      { ...r, entries: [{ ...r.entries[0], nonce: { $bytes: 'AAAA' } }] },
      { ...r, entries: Array.from({ length: 65 }, () => r.entries[0]) },
      { ...r, recipientKey: 'did:key:zNope' },
      { ...r, code: 'https://example.com' },
      { ...r, createdAt: 'yesterday' },
    ];
    for (const c of cases) expect(refusal(() => openEntries(c, ctx)).code).toBe('SECRETS_RECORD_INVALID');
    const both = refusal(() => openEntries({ ...r, algorithm: 'rot13', createdAt: 'x' }, ctx)).text;
    expect(both).toContain('algorithm');
    expect(both).toContain('createdAt');
  });

  it('refuse to seal bad names, duplicates, too many entries and oversized values without echoing values', () => {
    const { seal } = setup();
    const cases = [
      [{ name: 'NOT-PORTABLE', value: SECRET }],
      [
        { name: 'A', value: SECRET },
        { name: 'A', value: SECRET },
      ],
      Array.from({ length: 65 }, (_, i) => ({ name: `N${i}`, value: SECRET })),
      [{ name: 'BIG', value: 'x'.repeat(65521) }],
      [],
    ];
    for (const entries of cases) {
      const got = refusal(() => seal({ entries }));
      expect(got.code).toBe('SECRETS_INPUT_INVALID');
      expect(got.text).not.toContain(SECRET);
    }
    expect(refusal(() => seal({ recipientKey: 'did:key:zNope' })).code).toBe('ENCRYPTION_KEY_INVALID');
    expect(refusal(() => seal({ recordUri: 'at://did:plc:x/other.collection/s1' })).code).toBe('SECRETS_INPUT_INVALID');
  });
});
