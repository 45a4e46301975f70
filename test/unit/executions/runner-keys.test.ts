// The runner's key ring (src/adapters/files/runner-keys.ts): created 0600 on first use, refused when others can
// read it, rotation keeps the old key until its retire date, and private keys never show in what it returns or
// throws.
import { chmodSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { JsonObject, Publisher } from '../../../src/adapters/atproto/index.ts';
import { openRunnerKeyRing } from '../../../src/adapters/files/runner-keys.ts';
import type { Parts } from '../../../src/config/parts.ts';
import { DEFAULT_OPERATOR_POLICY, parseOperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import { putRunnerRecordFor } from '../../../src/supervisor/executions/execution-receipts.ts';
import { openEntries, sealEntries, SECRETS_NSID } from '../../../src/domain/at-run/sealed-secrets.ts';
import { RunlogError } from '../../../src/domain/errors.ts';
import { freshDirs } from '../../support/tmp.ts';

const dirs = freshDirs('runlog-keys-');
const RECORD_URI = `at://did:plc:author0000000000000000000/${SECRETS_NSID}/s1`;
const RUNNER = 'did:plc:runner0000000000000000000';
const CODE = 'at://did:plc:coder00000000000000000000/dev.mainasara.at-run.beta.v2.code/3kabc';

function refusal(fn: () => unknown): RunlogError {
  try {
    fn();
  } catch (err) {
    if (err instanceof RunlogError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

const privateKeysIn = (file: string): string[] =>
  (JSON.parse(readFileSync(file, 'utf8')) as { keys: { privateKey: string }[] }).keys.map((k) => k.privateKey);

describe('the runner key ring', () => {
  it('is created 0600 with one current key on first use, in a home made 0700', () => {
    const home = join(dirs(), 'home');
    const ring = openRunnerKeyRing(home);
    const current = ring.current();
    expect(current.publicKey).toMatch(/^did:key:z6LS/);
    expect(current.current).toBe(true);
    expect(current.retiresAt).toBeUndefined();
    expect(statSync(ring.file).mode & 0o777).toBe(0o600);
    expect(statSync(home).mode & 0o777).toBe(0o700);
    // Later calls (and another handle on the same home) see the same key.
    expect(openRunnerKeyRing(home).current().publicKey).toBe(current.publicKey);
  });

  it('is refused when group or others can read it, and used again once it is 0600', () => {
    const ring = openRunnerKeyRing(dirs());
    ring.current();
    chmodSync(ring.file, 0o644);
    const err = refusal(() => ring.current());
    expect(err.code).toBe('RUNNER_KEYS_INSECURE');
    expect(err.message).toContain('0644');
    expect(refusal(() => ring.list()).code).toBe('RUNNER_KEYS_INSECURE');
    chmodSync(ring.file, 0o640);
    expect(refusal(() => ring.forDecryption(ring.file, new Date())).code).toBe('RUNNER_KEYS_INSECURE');
    chmodSync(ring.file, 0o600);
    expect(ring.list()).toHaveLength(1);
  });

  it('is refused when it is a symbolic link', () => {
    const dir = dirs();
    const real = openRunnerKeyRing(join(dir, 'real'));
    real.current();
    mkdirSync(join(dir, 'via'), { mode: 0o700 });
    const viaLink = openRunnerKeyRing(join(dir, 'via'));
    symlinkSync(real.file, viaLink.file);
    expect(refusal(() => viaLink.current()).code).toBe('RUNNER_KEYS_INSECURE');
  });

  it('is refused as damaged, without quoting its text, when it does not parse', () => {
    const ring = openRunnerKeyRing(dirs());
    ring.current();
    const [secret] = privateKeysIn(ring.file);
    writeFileSync(ring.file, `{"version":1,"keys":[{"privateKey":"${secret}"`, { mode: 0o600 });
    const err = refusal(() => ring.current());
    expect(err.code).toBe('RUNNER_KEYS_DAMAGED');
    expect(`${err.message} ${JSON.stringify(err)}`).not.toContain(secret);
  });

  it('rotates to a new current key and keeps the old one for decryption until its retire date', () => {
    const ring = openRunnerKeyRing(dirs());
    const old = ring.current();
    const record = sealEntries({
      recordUri: RECORD_URI,
      runner: RUNNER,
      recipientKey: old.publicKey,
      code: CODE,
      entries: [{ name: 'TOKEN', value: 'sealed-to-the-old-key' }],
    });
    const now = new Date('2030-01-01T00:00:00Z');
    const { current, retiring } = ring.rotate({ retireOldAt: '2030-02-01T00:00:00Z', now });
    expect(retiring).toEqual({ ...old, retiresAt: '2030-02-01T00:00:00.000Z', current: false });
    expect(current.publicKey).not.toBe(old.publicKey);
    expect(ring.current().publicKey).toBe(current.publicKey);
    expect(ring.list().map((k) => k.publicKey)).toEqual([old.publicKey, current.publicKey]);
    const ctx = { recordUri: RECORD_URI, runnerDid: RUNNER, codeUri: CODE, keyFor: ring.forDecryption };
    expect(openEntries(record, { ...ctx, now: new Date('2030-01-31T23:59:59Z') }).TOKEN).toBe('sealed-to-the-old-key');
    expect(refusal(() => openEntries(record, { ...ctx, now: new Date('2030-02-01T00:00:00Z') })).code).toBe(
      'SECRETS_KEY_RETIRED',
    );
    // The new key opens at once; a key the ring never held is unknown.
    expect(() => ring.forDecryption(current.publicKey, now)).not.toThrow();
    expect(refusal(() => ring.forDecryption('did:key:z6LSunknown', now)).code).toBe('SECRETS_KEY_UNKNOWN');
  });

  it('drops keys past their retire date at the next rotation', () => {
    const ring = openRunnerKeyRing(dirs());
    const first = ring.current();
    ring.rotate({ retireOldAt: '2030-02-01T00:00:00Z', now: new Date('2030-01-01T00:00:00Z') });
    ring.rotate({ retireOldAt: '2030-04-01T00:00:00Z', now: new Date('2030-03-01T00:00:00Z') });
    const keys = ring.list();
    expect(keys).toHaveLength(2);
    expect(keys.map((k) => k.publicKey)).not.toContain(first.publicKey);
    expect(privateKeysIn(ring.file)).toHaveLength(2);
  });

  it('refuses a rotation without a retire date in the future', () => {
    const ring = openRunnerKeyRing(dirs());
    const before = ring.list();
    for (const retireOldAt of ['2020-01-01T00:00:00Z', 'next week', ''])
      expect(refusal(() => ring.rotate({ retireOldAt })).code).toBe('KEY_RETIRE_INVALID');
    expect(ring.list()).toEqual(before);
  });

  it('never shows a private key in list(), JSON, util.inspect or its errors', () => {
    const ring = openRunnerKeyRing(dirs());
    ring.rotate({ retireOldAt: new Date(Date.now() + 86_400_000).toISOString() });
    const secrets = privateKeysIn(ring.file);
    const hex = secrets.map((s) => Buffer.from(s, 'base64').toString('hex'));
    const key = ring.forDecryption(ring.current().publicKey, new Date());
    const shown = [
      JSON.stringify(ring.list()),
      inspect(ring.list(), { depth: 9 }),
      JSON.stringify(key),
      inspect(key, { showHidden: true, depth: 9 }),
      JSON.stringify({ ...key }),
      inspect(ring, { showHidden: true, depth: 9 }),
      JSON.stringify(refusal(() => ring.forDecryption('did:key:z6LSx', new Date()))),
    ].join('\n');
    for (const s of [...secrets, ...hex]) expect(shown).not.toContain(s);
    expect(shown).toContain(ring.current().publicKey);
  });
});

describe("the runner record's keys", () => {
  const parts: Parts = {
    setupDir: '/nonexistent',
    rootfs: '/nonexistent',
    registry: '127.0.0.1:5000',
    images: { 'at-run-sandbox': `127.0.0.1:5000/at-run-sandbox@sha256:${'a'.repeat(64)}` },
    dockerSocket: '/nonexistent',
  };
  const written: JsonObject[] = [];
  const publisher = {
    did: RUNNER,
    putRecord: async (_collection: string, _rkey: string | undefined, record: JsonObject) => {
      written.push(record);
      return { uri: `at://${RUNNER}/dev.mainasara.at-run.beta.v2.runner/self`, cid: 'bafy' };
    },
  } as unknown as Publisher;

  it('advertise the current key and the keys not yet retired, with their retire dates', async () => {
    const ring = openRunnerKeyRing(dirs());
    const first = ring.current();
    ring.rotate({ retireOldAt: '2030-02-01T00:00:00Z', now: new Date('2030-01-01T00:00:00Z') });
    const second = ring.current();
    ring.rotate({ retireOldAt: '2030-06-01T00:00:00Z', now: new Date('2030-01-15T00:00:00Z') });
    const third = ring.current();
    const platform = { os: 'linux', architecture: 'amd64' };
    await putRunnerRecordFor(publisher, parts, DEFAULT_OPERATOR_POLICY, platform, ring.list(), new Date('2030-03-01'));
    expect(written.at(-1)).toMatchObject({
      encryptionKey: third.publicKey,
      encryptionKeys: [
        { publicKey: second.publicKey, retiresAt: '2030-06-01T00:00:00.000Z' },
        { publicKey: third.publicKey },
      ],
    });
    expect(JSON.stringify(written.at(-1))).not.toContain(first.publicKey);
    expect(JSON.stringify(written.at(-1))).not.toMatch(/privateKey/);
    await putRunnerRecordFor(publisher, parts, DEFAULT_OPERATOR_POLICY, platform);
    expect(written.at(-1)).not.toHaveProperty('encryptionKey');
  });

  it('advertise the network destinations and limits of the policy, never its allowRanges', async () => {
    const platform = { os: 'linux', architecture: 'amd64' };
    await putRunnerRecordFor(publisher, parts, DEFAULT_OPERATOR_POLICY, platform);
    expect(written.at(-1)).toMatchObject({ limits: { network: 'none' } });
    expect(written.at(-1)).not.toHaveProperty('egress');
    const policy = parseOperatorPolicy({
      network: {
        destinations: [{ host: 'api.example.com', ports: [443] }],
        allowRanges: ['10.1.2.0/24'],
        limits: { bytes: 1000, seconds: 30, connections: 2 },
      },
    });
    await putRunnerRecordFor(publisher, parts, policy, platform);
    expect(written.at(-1)).toMatchObject({
      limits: { network: 'proxy' },
      egress: {
        destinations: [{ host: 'api.example.com', ports: [443] }],
        limits: { maxBytes: 1000, maxSeconds: 30, maxConnections: 2 },
      },
    });
    expect(JSON.stringify(written.at(-1))).not.toContain('10.1.2.0');
  });
});
