// Sealed secrets on a real PDS and PLC directory (in-process @atproto/dev-env): a runner account advertises its key
// ring's public key in its runner record; another account runs `runlog secrets seal` (the CLI, in process), which
// reads that record verified and writes a secrets record in its own repo; the runner opens the entries with its
// ring. The record as the PDS stores and serves it never holds the plaintext bytes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AT_RUN_V2,
  createAtprotoReader,
  putRunnerRecord,
  type AtprotoReader,
} from '../../../src/adapters/atproto/index.ts';
import { openRunnerKeyRing, type RunnerKeyRing } from '../../../src/adapters/files/runner-keys.ts';
import { main } from '../../../src/cli/main.ts';
import type { Parts } from '../../../src/config/parts.ts';
import { DEFAULT_OPERATOR_POLICY } from '../../../src/domain/at-run/operator-policy.ts';
import { putRunnerRecordFor } from '../../../src/supervisor/executions/execution-receipts.ts';
import { openSecretsFor } from '../../../src/supervisor/executions/sealed-secrets-records.ts';
import { capture } from '../../support/cli-in-process.ts';
import { codeOf } from '../../support/errors.ts';
import { startTestPds, type TestAccount, type TestPds } from '../../support/pds.ts';
import { freshDirs } from '../../support/tmp.ts';

const dirs = freshDirs('runlog-sealed-', 'all');
const SANDBOX = `127.0.0.1:5000/at-run-sandbox@sha256:${'a'.repeat(64)}`;
const parts: Parts = {
  setupDir: '/nonexistent',
  rootfs: '/nonexistent',
  registry: '127.0.0.1:5000',
  images: { 'at-run-sandbox': SANDBOX },
  dockerSocket: '/nonexistent',
};
const FROM_ENV = 'RUNLOG_INT_SEALED_SECRET';
const ENV_VALUE = 'plaintext-from-the-environment-7f3a';
const ARG_VALUE = 'plaintext-from-argv-91c2';

let pds: TestPds;
let runner: TestAccount;
let alice: TestAccount;
let ring: RunnerKeyRing;
let reader: AtprotoReader;
let code: string;

async function seal(account: TestAccount, ...argv: string[]) {
  const c = capture();
  const exit = await main(
    [
      'secrets',
      'seal',
      ...argv,
      '--pds',
      pds.pdsUrl,
      '--identifier',
      account.handle,
      '--password',
      account.password,
      '--plc',
      pds.plcUrl,
    ],
    c.factory,
  );
  return { exit, out: c.stdout(), err: c.stderr() };
}

async function storedBytes(uri: string): Promise<{ car: Buffer; json: Buffer }> {
  const [, , did, collection, rkey] = uri.split('/');
  const q = `did=${did}&collection=${collection}&rkey=${rkey}`;
  const car = Buffer.from(await (await fetch(`${pds.pdsUrl}/xrpc/com.atproto.sync.getRecord?${q}`)).arrayBuffer());
  const json = Buffer.from(
    await (
      await fetch(`${pds.pdsUrl}/xrpc/com.atproto.repo.getRecord?repo=${did}&collection=${collection}&rkey=${rkey}`)
    ).arrayBuffer(),
  );
  return { car, json };
}

beforeAll(async () => {
  pds = await startTestPds();
  runner = await pds.createAccount('runner.test');
  alice = await pds.createAccount('alice.test');
  ring = openRunnerKeyRing(dirs());
  reader = createAtprotoReader({ plcUrl: pds.plcUrl, didCacheTtlMs: 0 });
  code = `at://${alice.did}/${AT_RUN_V2.code}/3kcodeabc`;
  await putRunnerRecordFor(
    runner.publisher,
    parts,
    DEFAULT_OPERATOR_POLICY,
    { os: 'linux', architecture: 'amd64' },
    ring.list(),
  );
});

afterAll(async () => {
  delete process.env[FROM_ENV];
  await pds?.close();
});

describe('sealed secrets between two accounts', () => {
  it("publishes the runner record with its key ring's current key", async () => {
    const rec = await reader.fetchRecord(`at://${runner.did}/${AT_RUN_V2.runner}/self`);
    expect(rec.value.encryptionKey).toBe(ring.current().publicKey);
    expect(rec.value.encryptionKeys).toEqual([{ publicKey: ring.current().publicKey }]);
  });

  it('seals with the CLI, and the runner opens the values for the allowed code only', async () => {
    process.env[FROM_ENV] = ENV_VALUE;
    const r = await seal(
      alice,
      '--runner',
      runner.did,
      '--code',
      code,
      '--from-env',
      FROM_ENV,
      `ARG_SECRET=${ARG_VALUE}`,
    );
    expect(r.exit, r.err).toBe(0);
    const [uri, cid] = r.out.split('\n');
    expect(uri).toMatch(new RegExp(`^at://${alice.did}/${AT_RUN_V2.secrets}/`));
    expect(r.err).toContain(`sealed ARG_SECRET, ${FROM_ENV} to ${ring.current().publicKey}`);
    expect(`${r.out}${r.err}`).not.toContain(ENV_VALUE);

    const ref = { uri: uri!, cid: cid! };
    const values = await openSecretsFor(reader, ring, { ref, runnerDid: runner.did, codeUri: code });
    expect({ ...values }).toEqual({ ARG_SECRET: ARG_VALUE, [FROM_ENV]: ENV_VALUE });

    const stored = await storedBytes(ref.uri);
    expect(stored.car.length).toBeGreaterThan(0);
    for (const plain of [ENV_VALUE, ARG_VALUE]) {
      expect(stored.car.includes(Buffer.from(plain))).toBe(false);
      expect(stored.json.includes(Buffer.from(plain))).toBe(false);
      expect(stored.json.includes(Buffer.from(Buffer.from(plain).toString('base64').slice(0, 16)))).toBe(false);
    }

    const otherCode = `at://${alice.did}/${AT_RUN_V2.code}/3kcodezzz`;
    expect(await codeOf(openSecretsFor(reader, ring, { ref, runnerDid: runner.did, codeUri: otherCode }))).toBe(
      'SECRETS_CODE_MISMATCH',
    );
    expect(await codeOf(openSecretsFor(reader, ring, { ref, runnerDid: alice.did, codeUri: code }))).toBe(
      'SECRETS_RUNNER_MISMATCH',
    );
    const stranger = openRunnerKeyRing(dirs());
    expect(await codeOf(openSecretsFor(reader, stranger, { ref, runnerDid: runner.did, codeUri: code }))).toBe(
      'SECRETS_KEY_UNKNOWN',
    );
  });

  it('keeps opening values sealed to the old key after a rotation, and seals new ones to the new key', async () => {
    const before = await seal(alice, '--runner', runner.did, 'TOKEN=before-rotation');
    expect(before.exit, before.err).toBe(0);
    const [uri, cid] = before.out.split('\n');
    const old = ring.current().publicKey;
    ring.rotate({ retireOldAt: new Date(Date.now() + 3_600_000).toISOString() });
    await putRunnerRecordFor(
      runner.publisher,
      parts,
      DEFAULT_OPERATOR_POLICY,
      { os: 'linux', architecture: 'amd64' },
      ring.list(),
    );
    const advertised = await reader.fetchRecord(`at://${runner.did}/${AT_RUN_V2.runner}/self`);
    expect(advertised.value.encryptionKey).toBe(ring.current().publicKey);
    expect(advertised.value.encryptionKeys).toEqual([
      { publicKey: old, retiresAt: ring.list()[0]!.retiresAt },
      { publicKey: ring.current().publicKey },
    ]);
    const ref = { uri: uri!, cid: cid! };
    expect((await openSecretsFor(reader, ring, { ref, runnerDid: runner.did, codeUri: code })).TOKEN).toBe(
      'before-rotation',
    );
    expect(
      await codeOf(
        openSecretsFor(reader, ring, {
          ref,
          runnerDid: runner.did,
          codeUri: code,
          now: new Date(Date.now() + 7_200_000),
        }),
      ),
    ).toBe('SECRETS_KEY_RETIRED');
    const after = await seal(alice, '--runner', runner.did, 'TOKEN=after-rotation');
    expect(after.exit, after.err).toBe(0);
    expect(after.err).toContain(ring.current().publicKey);
    expect(ring.current().publicKey).not.toBe(old);
  });

  it('refuses to seal to a runner whose record advertises no key', async () => {
    const bare = await pds.createAccount('bare-runner.test');
    await putRunnerRecord(bare.publisher, {
      protocolVersions: [1],
      runtimeKinds: ['language'],
      platforms: [{ os: 'linux', architecture: 'amd64' }],
      isolation: { backend: 'docker', ociRuntime: 'runc', strong: false },
      sandboxImage: SANDBOX,
      limits: {
        maxMemoryBytes: 1,
        maxPids: 1,
        maxMilliCpus: 1,
        maxTimeoutMs: 1,
        maxCodeBlobBytes: 1,
        maxRuntimeArchiveBytes: 1,
        network: 'none',
      },
    });
    const r = await seal(alice, '--runner', bare.did, 'TOKEN=x', '--json');
    expect(r.exit).toBe(2);
    expect(r.err).toContain('RUNNER_ENCRYPTION_KEY_MISSING');
  });
});
