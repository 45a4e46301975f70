// at-run executions end to end under the supervisor: a real PDS and PLC (in process), the real local
// registry, real Docker. Records are published the way authors publish them (runlog's publishing),
// then executed through createRunlog().execute().
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeArchive } from '../../../src/adapters/archive/index.ts';
import { AT_RUN_V2 } from '../../../src/adapters/atproto/index.ts';
import { publishCode, publishRuntime } from '../../../src/supervisor/executions/publishing.ts';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  docker,
  imageRef,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';
import {
  replaceRecordBlock,
  startPdsProxy,
  startTestPds,
  type PdsProxy,
  type TestAccount,
  type TestPds,
} from '../../support/pds.ts';

const REPO = resolve(import.meta.dirname, '../../..');
// This file's containers and volumes only: files of the other int lane run beside it on the same daemon.
const LABELS = { ...TEST_LABELS, 'runlog.test-run': `exec-${process.pid}-${Date.now()}` };
let pds: TestPds;
let rl: Runlog;
let home: string;
let publisherAcct: TestAccount;
let alice: TestAccount;
const runtimes: Record<'node' | 'python', { uri: string; cid: string }> = {} as never;
const code: Record<string, { uri: string; cid: string }> = {};

const labelsOf = (executionId: string) => JSON.stringify({ label: [`runlog.stream=execution-${executionId}`] });
async function leftovers(executionId: string): Promise<{ containers: number }> {
  await rl.idle(); // execute() answers on the outcome; the used container's removal runs after it
  const containers = await docker.listContainers({ all: true, filters: labelsOf(executionId) });
  return { containers: containers.length };
}
// This supervisor's volumes (every volume it makes carries its home's label): the other int lane makes its own.
const volumeNames = async () =>
  new Set(
    ((await docker.listVolumes({ filters: JSON.stringify({ label: [`runlog.home=${home}`] }) })).Volumes ?? []).map(
      (v) => v.Name,
    ),
  );

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  pds = await startTestPds();
  publisherAcct = await pds.createAccount('runtimes.test');
  alice = await pds.createAccount('alice.test');
  for (const lang of ['node', 'python'] as const) {
    const { uri, cid } = await publishRuntime(publisherAcct.publisher, {
      dir: join(REPO, `runtimes/${lang}`),
      image: imageRef(`runtime-${lang}`),
    });
    runtimes[lang] = { uri, cid };
  }
  const atproto = { plcUrl: pds.plcUrl };
  code.node = await publishCode(alice.publisher, {
    dir: join(REPO, 'examples/greet-node'),
    runtime: runtimes.node.uri,
    atproto,
  });
  code.python = await publishCode(alice.publisher, {
    dir: join(REPO, 'examples/greet-python'),
    runtime: runtimes.python.uri,
    atproto,
  });
  home = mkdtempSync(join(tmpdir(), 'runlog-exec-'));
  rl = await createRunlog({ home, atproto, labels: LABELS, log: () => undefined });
}, 240_000);

afterAll(async () => {
  await rl?.close();
  await pds?.close();
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('execute: greet end to end', () => {
  it.each(['node', 'python'] as const)(
    '%s: resolves from the PDS, materializes, runs, returns the output',
    async (lang) => {
      const steps: string[] = [];
      const out = await rl.execute({
        uri: code[lang]!.uri,
        handler: 'greet',
        input: { name: 'Ada' },
        callerDid: alice.did,
        onProgress: (s) => steps.push(s.name),
      });
      expect(out.failure).toBeUndefined();
      expect(out.status).toBe('succeeded');
      expect(out.output).toMatchObject({
        greeting: 'Hello, Ada!',
        language: lang === 'node' ? 'javascript' : 'python',
        caller: alice.did,
      });
      // The log records every step with what it used.
      const ctx = out.view.context as any;
      expect(ctx.resolved).toMatchObject({
        codeCid: code[lang]!.cid,
        runtimeCid: runtimes[lang].cid,
        image: imageRef(`runtime-${lang}`),
        mode: 'strict',
      });
      expect(ctx.resolved.limits).toMatchObject({ memoryMb: 128, network: false });
      expect(ctx.materialized).toMatchObject({ runtimeVolume: expect.any(String), codeVolume: expect.any(String) });
      expect(ctx.result.outputHash).toMatch(/^[0-9a-f]{64}$/);
      expect(steps).toEqual(
        expect.arrayContaining(['code-record', 'runtime-record', 'runtime-materialized', 'code-blob']),
      );
      const types = (await rl.events(out.executionId)).map((e) => e.type);
      expect(types[0]).toBe('execution.requested');
      expect(types).toEqual(
        expect.arrayContaining([
          'execution.resolved',
          'execution.materialized',
          'execution.started',
          'execution.succeeded',
        ]),
      );
      expect(await leftovers(out.executionId)).toEqual({ containers: 0 });
    },
  );

  it('a handler error ends failed (runtime) with the handler code; the supervisor keeps going', async () => {
    const out = await rl.execute({ uri: code.node!.uri, handler: 'fail', input: {} });
    expect(out.status).toBe('failed');
    expect(out.failure).toMatchObject({ reason: 'runtime', code: 'EXAMPLE_FAILURE' });
    const again = await rl.execute({ uri: code.node!.uri, handler: 'greet', input: { name: 'again' } });
    expect(again.status).toBe('succeeded');
  });

  it('a deadline shorter than the handler ends failed with reason timeout', async () => {
    const slow = await publishCodeFiles(
      alice,
      'slow',
      { 'index.mjs': 'export async function wait() { await new Promise((r) => setTimeout(r, 60000)); return 1; }\n' },
      'index.mjs',
      runtimes.node,
    );
    const out = await rl.execute({ uri: slow.uri, handler: 'wait', input: {}, timeoutMs: 1500 });
    expect(out.failure).toMatchObject({ reason: 'timeout' });
    expect(await leftovers(out.executionId)).toEqual({ containers: 0 });
  });
});

describe('execution receipts', () => {
  it("are written to the runner's own repo and named by the outcome event", async () => {
    const runner = await pds.createAccount('runner.test');
    const home2 = mkdtempSync(join(tmpdir(), 'runlog-exec-receipts-'));
    const rl2 = await createRunlog({
      home: home2,
      atproto: { plcUrl: pds.plcUrl },
      labels: LABELS,
      receipts: runner.publisher,
      log: () => undefined,
    });
    try {
      const out = await rl2.execute({ uri: code.node!.uri, handler: 'greet', input: { name: 'receipt' } });
      expect(out.status).toBe('succeeded');
      const done = (await rl2.events(out.executionId)).at(-1)!;
      expect(done.type).toBe('execution.succeeded');
      const ref = done.data.receipt as { uri: string; cid: string };
      expect(ref.uri).toBe(`at://${runner.did}/${AT_RUN_V2.execution}/${out.executionId}`);
      const res = await fetch(
        `${pds.pdsUrl}/xrpc/com.atproto.repo.getRecord?repo=${runner.did}&collection=${AT_RUN_V2.execution}&rkey=${out.executionId}`,
      );
      const rec = (await res.json()) as { cid: string; value: Record<string, any> };
      expect(rec.cid).toBe(ref.cid);
      expect(rec.value).toMatchObject({
        code: { uri: code.node!.uri, cid: code.node!.cid },
        runtime: { cid: runtimes.node.cid },
        outcome: 'succeeded',
        handler: 'greet',
      });
      expect(rec.value.outputSha256).toBe((out.view.context as any).result.outputHash);
      const self = await fetch(
        `${pds.pdsUrl}/xrpc/com.atproto.repo.getRecord?repo=${runner.did}&collection=${AT_RUN_V2.runner}&rkey=self`,
      );
      expect(((await self.json()) as any).value).toMatchObject({
        protocolVersions: [1],
        isolation: { backend: 'docker', ociRuntime: 'runc' },
        limits: { network: 'none' },
      });
    } finally {
      await rl2.close();
      rmSync(home2, { recursive: true, force: true });
    }
  });
});

describe('changes between runs are caught on the next run (DID document cache on, hints warm)', () => {
  const version = (v: string) => ({ 'index.mjs': `export const which = () => ({ version: '${v}' });\n` });
  const run = (uri: string) => rl.execute({ uri, handler: 'which', input: {} });

  it('a code record replaced in place runs its new code, with its new CID recorded', async () => {
    const v1 = await publishCodeFiles(alice, 'live', version('v1'), 'index.mjs', runtimes.node, 'live-code');
    const first = await run(v1.uri);
    expect(first.output).toEqual({ version: 'v1' });
    expect(await run(v1.uri)).toMatchObject({ output: { version: 'v1' } }); // warm: the hints name v1's blob
    const v2 = await publishCodeFiles(alice, 'live', version('v2'), 'index.mjs', runtimes.node, 'live-code');
    expect(v2.uri).toBe(v1.uri);
    const second = await run(v1.uri);
    expect(second.output).toEqual({ version: 'v2' });
    const ctx = second.view.context as any;
    expect(ctx.resolved).toMatchObject({ codeCid: v2.cid, blobCid: v2.blobCid });
    expect(ctx.materialized.codeVolume).not.toBe((first.view.context as any).materialized.codeVolume);
  });

  it('an alias retargeted between runs runs the new target; one pinning a replaced version fails RECORD_CID_MISMATCH', async () => {
    const a = await publishCodeFiles(alice, 'alias-a', version('a'), 'index.mjs', runtimes.node);
    const b = await publishCodeFiles(alice, 'alias-b', version('b'), 'index.mjs', runtimes.node);
    const alias = await alice.publisher.putRecord(AT_RUN_V2.alias, 'current', {
      $type: AT_RUN_V2.alias,
      target: { uri: a.uri, cid: a.cid },
      createdAt: new Date().toISOString(),
    } as never);
    expect(await run(alias.uri)).toMatchObject({ output: { version: 'a' } });
    await alice.publisher.putRecord(AT_RUN_V2.alias, 'current', {
      $type: AT_RUN_V2.alias,
      target: { uri: b.uri, cid: b.cid },
      createdAt: new Date().toISOString(),
    } as never);
    const out = await run(alias.uri);
    expect(out.output).toEqual({ version: 'b' });
    expect((out.view.context as any).resolved).toMatchObject({ codeUri: b.uri, codeCid: b.cid });
    // Replace b's record under the alias: the alias still pins the old CID.
    await publishCodeFiles(alice, 'alias-b', version('b2'), 'index.mjs', runtimes.node, b.uri.split('/').at(-1));
    const stale = await run(alias.uri);
    expect(stale.failure).toMatchObject({ reason: 'validation', code: 'RECORD_CID_MISMATCH' });
  });

  it('a code record re-bound to another runtime between runs is bound again (and a broken binding is refused)', async () => {
    const live = await publishCodeFiles(alice, 'rebind', version('node'), 'index.mjs', runtimes.node, 'rebind');
    expect(await run(live.uri)).toMatchObject({ status: 'succeeded' });
    // Same blob, same entrypoint, the runtime reference now names the python runtime's URI with the node CID.
    const current = (await (
      await fetch(
        `${pds.pdsUrl}/xrpc/com.atproto.repo.getRecord?repo=${alice.did}&collection=${AT_RUN_V2.code}&rkey=rebind`,
      )
    ).json()) as { value: Record<string, unknown> };
    await rawPutAt(alice, AT_RUN_V2.code, 'rebind', {
      ...current.value,
      runtimeRecord: { uri: runtimes.python.uri, cid: runtimes.node.cid },
    });
    const out = await run(live.uri);
    expect(out.failure).toMatchObject({ reason: 'validation', code: 'RUNTIME_BINDING_MISMATCH' });
  });
});

/** Packs files under one top-level directory and publishes a code record for them (bypassing nothing). */
async function publishCodeFiles(
  acct: TestAccount,
  name: string,
  files: Record<string, string>,
  entrypoint: string,
  runtime: { uri: string; cid: string },
  rkey?: string,
) {
  const dir = mkdtempSync(join(tmpdir(), `runlog-code-${name}-`));
  const { writeFileSync } = await import('node:fs');
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  try {
    return await publishCode(acct.publisher, {
      dir,
      runtime: runtime.uri,
      entrypoint,
      atproto: { plcUrl: pds.plcUrl },
      ...(rkey ? { rkey } : {}),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Writes a record as-is (no client-side validation): what a careless or hostile author could publish. */
const rawPut = (acct: TestAccount, collection: string, record: Record<string, unknown>) =>
  acct.publisher.putRecord(collection, undefined, record as never);
const rawPutAt = (acct: TestAccount, collection: string, rkey: string, record: Record<string, unknown>) =>
  acct.publisher.putRecord(collection, rkey, record as never);

describe('rejected before anything runs, each with its own code, nothing left behind', () => {
  const tarOf = (entries: Parameters<typeof writeArchive>[0]) => writeArchive(entries);
  async function codeRecordWith(opts: {
    runtime?: { uri: string; cid: string };
    mime?: string;
    archive?: Buffer;
    entrypoint?: string;
  }) {
    const runtime = opts.runtime ?? runtimes.node;
    const archive =
      opts.archive ??
      (await tarOf([
        { path: 'app', type: 'directory', mode: 0o755, size: 0 },
        {
          path: 'app/index.mjs',
          type: 'file',
          mode: 0o644,
          size: 44,
          data: Buffer.from('export const greet = () => ({ ok: true });\n\n'),
        },
      ]));
    const blob = await alice.publisher.uploadBlob(archive, opts.mime ?? `application/${runtime.cid}`);
    return rawPut(alice, AT_RUN_V2.code, {
      $type: AT_RUN_V2.code,
      runtime: 'node',
      runtimeRecord: runtime,
      blob,
      entrypoint: opts.entrypoint ?? 'index.mjs',
      createdAt: new Date().toISOString(),
    });
  }
  async function runtimeRecordWith(platforms: Record<string, unknown>[]) {
    const rec = await rawPut(publisherAcct, AT_RUN_V2.runtime, {
      $type: AT_RUN_V2.runtime,
      name: 'node',
      protocolVersion: 1,
      kind: 'language',
      platforms,
      createdAt: new Date().toISOString(),
    });
    return rec;
  }
  const goodPlatform = () => ({
    os: 'linux',
    architecture: 'amd64',
    image: imageRef('runtime-node'),
    exportPath: '/at-run/runtime',
    launcher: { path: 'bin/node', args: ['/opt/at-run/runtime/adapter/worker.mjs', '{entrypoint}'] },
  });

  async function expectRejected(uri: string, code: string | RegExp, reason = 'validation') {
    // An earlier test's background work (its sandbox's removal, the pool's next pre-start) finishes first: it may
    // create or remove volumes, and what this run leaves behind is measured against a settled supervisor.
    await rl.idle();
    const before = await volumeNames();
    const out = await rl.execute({ uri, handler: 'greet', input: {} });
    expect(out.status).toBe('failed');
    expect(out.failure!.reason).toBe(reason);
    if (typeof code === 'string') expect(out.failure!.code).toBe(code);
    else expect(out.failure!.code).toMatch(code);
    expect(await leftovers(out.executionId)).toEqual({ containers: 0 });
    const after = await volumeNames();
    expect([...after].filter((v) => !before.has(v))).toEqual([]);
    return out;
  }

  it('record CID mismatch (an alias pinning another CID)', async () => {
    const alias = await rawPut(alice, AT_RUN_V2.alias, {
      $type: AT_RUN_V2.alias,
      target: { uri: code.node!.uri, cid: code.python!.cid },
      createdAt: new Date().toISOString(),
    });
    await expectRejected(alias.uri, 'RECORD_CID_MISMATCH');
  });

  it('runtime record CID ≠ the strong reference', async () => {
    const rec = await codeRecordWith({ runtime: { uri: runtimes.node.uri, cid: runtimes.python.cid } });
    await expectRejected(rec.uri, 'RUNTIME_BINDING_MISMATCH');
  });

  it('blob MIME subtype ≠ the runtime record CID', async () => {
    const rec = await codeRecordWith({ mime: `application/${runtimes.python.cid}` });
    await expectRejected(rec.uri, 'CODE_MIME_MISMATCH');
  });

  it('a runtime image referenced by tag instead of digest', async () => {
    const rt = await runtimeRecordWith([{ ...goodPlatform(), image: 'localhost:5000/runtime-node:latest' }]);
    await expectRejected((await codeRecordWith({ runtime: rt })).uri, 'RUNTIME_IMAGE_NOT_DIGEST');
  });

  it('a missing platform, and a duplicate platform', async () => {
    const missing = await runtimeRecordWith([{ ...goodPlatform(), architecture: 'arm64' }]);
    await expectRejected((await codeRecordWith({ runtime: missing })).uri, 'RUNTIME_PLATFORM_MISSING');
    const dup = await runtimeRecordWith([goodPlatform(), goodPlatform()]);
    await expectRejected((await codeRecordWith({ runtime: dup })).uri, 'RUNTIME_PLATFORM_DUPLICATE');
  });

  it('a launcher with shell syntax', async () => {
    const rt = await runtimeRecordWith([
      {
        ...goodPlatform(),
        launcher: {
          path: 'bin/node',
          args: ['-e', 'require("child_process").execSync("id"); $(whoami)', '{entrypoint}'],
        },
      },
    ]);
    await expectRejected((await codeRecordWith({ runtime: rt })).uri, 'RUNTIME_ARGS_SHELL_SYNTAX');
  });

  it('a code archive with traversal, and one with an escaping symlink', async () => {
    const traversal = Buffer.concat([
      await tarOf([
        { path: 'app', type: 'directory', mode: 0o755, size: 0 },
        { path: 'app/index.mjs', type: 'file', mode: 0o644, size: 3, data: Buffer.from('x\n\n') },
      ]),
    ]);
    // writeArchive refuses to write traversal, so craft the header by hand: name "app/../../etc/x".
    const evil = craftTar([
      { name: 'app/', type: '5' },
      { name: 'app/index.mjs', body: 'export const greet = () => 1;\n' },
      { name: 'app/../../etc/evil', body: 'owned\n' },
    ]);
    await expectRejected((await codeRecordWith({ archive: evil })).uri, 'ARCHIVE_REJECTED');
    const escaping = craftTar([
      { name: 'app/', type: '5' },
      { name: 'app/index.mjs', type: '2', linkname: '../../../../etc/passwd' },
    ]);
    await expectRejected((await codeRecordWith({ archive: escaping })).uri, 'ARCHIVE_REJECTED');
    expect(traversal.length).toBeGreaterThan(0);
  });

  it('a requested network fails closed', async () => {
    const blob = await alice.publisher.uploadBlob(
      await tarOf([
        { path: 'app', type: 'directory', mode: 0o755, size: 0 },
        { path: 'app/index.mjs', type: 'file', mode: 0o644, size: 2, data: Buffer.from('//') },
      ]),
      `application/${runtimes.node.cid}`,
    );
    const rec = await rawPut(alice, AT_RUN_V2.code, {
      $type: AT_RUN_V2.code,
      runtime: 'node',
      runtimeRecord: runtimes.node,
      blob,
      entrypoint: 'index.mjs',
      requested: { network: true },
      createdAt: new Date().toISOString(),
    });
    await expectRejected(rec.uri, 'NETWORK_NOT_ALLOWED');
  });
});

describe('a lying PDS is caught in strict mode', () => {
  let proxy: PdsProxy;
  let mallory: TestAccount;
  let target: { uri: string; cid: string };
  let mode: 'forge' | 'tamper-blob' = 'forge';
  beforeAll(async () => {
    mallory = await pds.createAccount('mallory.test');
    target = await publishCodeFiles(
      mallory,
      'victim',
      { 'index.mjs': 'export const greet = () => ({ honest: true });\n' },
      'index.mjs',
      runtimes.node,
    );
    proxy = await startPdsProxy(pds.pdsUrl, async (path, up) => {
      if (up.status !== 200) return up;
      if (
        mode === 'forge' &&
        path.startsWith('/xrpc/com.atproto.sync.getRecord?') &&
        path.includes(encodeURIComponent(AT_RUN_V2.code))
      ) {
        const value = JSON.parse(
          JSON.stringify({
            $type: AT_RUN_V2.code,
            runtime: 'node',
            runtimeRecord: runtimes.node,
            entrypoint: 'evil.mjs',
            createdAt: '2026-01-01T00:00:00.000Z',
          }),
        );
        return { ...up, body: await replaceRecordBlock(up.body, AT_RUN_V2.code, value) };
      }
      if (mode === 'tamper-blob' && path.startsWith('/xrpc/com.atproto.sync.getBlob?')) {
        const b = Uint8Array.from(up.body);
        b[600] = b[600]! ^ 0x01;
        return { ...up, body: b };
      }
      return up;
    });
    await pds.setPdsEndpoint(mallory.did, proxy.url);
  });
  afterAll(async () => proxy?.close());

  it('a record not matching the signed commit (RECORD_PROOF_INVALID)', async () => {
    mode = 'forge';
    const out = await rl.execute({ uri: target.uri, handler: 'greet', input: {} });
    expect(out.failure).toMatchObject({ reason: 'validation' });
    expect(out.failure!.code).toMatch(/^RECORD_(PROOF|SIGNATURE)_INVALID$/);
  });

  it('tampered blob bytes (BLOB_CID_MISMATCH)', async () => {
    mode = 'tamper-blob';
    const out = await rl.execute({ uri: target.uri, handler: 'greet', input: {} });
    expect(out.failure).toMatchObject({ reason: 'validation', code: 'BLOB_CID_MISMATCH' });
  });
});

/** A minimal ustar writer for hostile archives (names and link targets exactly as given). */
function craftTar(entries: { name: string; type?: string; body?: string; linkname?: string }[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const body = Buffer.from(e.body ?? '');
    const h = Buffer.alloc(512);
    h.write(e.name, 0, 100, 'utf8');
    h.write('0000644\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    h.write(`${body.length.toString(8).padStart(11, '0')}\0`, 124);
    h.write('00000000000\0', 136);
    h.write('        ', 148);
    h.write(e.type ?? '0', 156);
    if (e.linkname) h.write(e.linkname, 157, 100, 'utf8');
    h.write('ustar\0', 257);
    h.write('00', 263);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(`${sum.toString(8).padStart(7, '0')}\0`, 148); // 7 digits: see sevenDigitChecksums in write.ts
    blocks.push(h, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}
