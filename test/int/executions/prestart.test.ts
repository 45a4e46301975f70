// Pre-started one-shot sandboxes against the real parts (Docker, the registry, a PDS from @atproto/dev-env):
// a sandbox is used by one execution and never again, a changed record or runtime is never served by a sandbox
// started for the old one, and a supervisor SIGKILLed with sandboxes waiting leaves nothing behind once it
// restarts. Everything this file creates carries its own label (runlog.test.prestart=<run>): it cleans up by it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishCode, publishRuntime } from '../../../src/supervisor/executions/publishing.ts';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { POOL_STREAM } from '../../../src/supervisor/executions/pool/sandbox-pool.ts';
import { AT_RUN_V2 } from '../../../src/adapters/atproto/index.ts';
import { collect } from '../../../src/store/port.ts';
import { until } from '../../support/apps.ts';
import { startChild, type ChildSupervisor } from '../../support/child-supervisor.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  docker,
  imageRef,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';
import { startTestPds, type TestAccount, type TestPds } from '../../support/pds.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const RUN = `${process.pid}-${Date.now()}`;
const LABELS = { ...TEST_LABELS, 'runlog.test.prestart': RUN };
// Archive limits of our own: the runtime volume is this file's, nobody else's run removes it under us. The
// operator trusts its own runtime publisher to pre-start (the default trusts none).
const policy = () => ({ archive: { maxEntries: 19_977 }, prestart: { publishers: [publisher.did] } });

// `write` leaves a file in the writable work dir and a process behind; `read` reports what it finds of them.
const FILES_CODE = `
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { spawn } from 'node:child_process';
const WORK = '/opt/at-run/work';
export function write(input) {
  writeFileSync(WORK + '/secret.txt', String(input.secret));
  globalThis.leaked = input.secret;
  return { host: hostname(), pid: process.pid, wrote: existsSync(WORK + '/secret.txt') };
}
export function read() {
  return {
    host: hostname(),
    pid: process.pid,
    file: existsSync(WORK + '/secret.txt') ? readFileSync(WORK + '/secret.txt', 'utf8') : null,
    leaked: globalThis.leaked ?? null,
  };
}
`;

let pds: TestPds;
let root: string;
let publisher: TestAccount;
let author: TestAccount;
let runtime: { uri: string; cid: string };
const opened: Runlog[] = [];
const children: ChildSupervisor[] = [];

async function open(home: string): Promise<Runlog> {
  const rl = await createRunlog({
    home,
    atproto: { plcUrl: pds.plcUrl },
    labels: LABELS,
    log: () => undefined,
    watchApps: false,
    engineWatch: false,
  });
  opened.push(rl);
  return rl;
}

function newHome(name: string, written: object = policy()): string {
  const home = mkdtempSync(join(root, `${name}-`));
  writeFileSync(join(home, 'operator-policy.json'), JSON.stringify(written));
  return home;
}

async function publishFiles(name: string, files: Record<string, string>, rkey?: string, rt = runtime) {
  const dir = mkdtempSync(join(root, `code-${name}-`));
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  return publishCode(author.publisher, {
    dir,
    runtime: rt.uri,
    entrypoint: 'index.mjs',
    atproto: { plcUrl: pds.plcUrl },
    ...(rkey ? { rkey } : {}),
  });
}

const prestartContainers = async (home: string) =>
  docker.listContainers({
    all: true,
    filters: JSON.stringify({ label: [`runlog.home=${home}`, 'runlog.kind=prestart', `runlog.test.prestart=${RUN}`] }),
  });
const homeContainers = async (home: string) =>
  docker.listContainers({
    all: true,
    filters: JSON.stringify({ label: [`runlog.home=${home}`, `runlog.test.prestart=${RUN}`] }),
  });
const poolFacts = (rl: Runlog) => collect(runlogInternals(rl).store.readStream(POOL_STREAM));
const profileOf = (out: { view: { context: unknown } }) =>
  (out.view.context as { profile?: Record<string, unknown> }).profile ?? {};
const containerOf = (out: { view: { context: unknown } }) => (out.view.context as { containerId: string }).containerId;

/** Waits until the pool has a started sandbox for the home (it is filled in the background). */
async function poolReady(home: string): Promise<string> {
  let id = '';
  await until(
    'a pre-started sandbox',
    async () => {
      const list = await prestartContainers(home);
      const running = list.find((c) => c.State === 'running');
      id = running?.Id ?? '';
      return id !== '';
    },
    60_000,
  );
  return id;
}

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  root = mkdtempSync(join(tmpdir(), 'runlog-prestart-'));
  pds = await startTestPds();
  publisher = await pds.createAccount('runtimes.test');
  author = await pds.createAccount('author.test');
  runtime = await publishRuntime(publisher.publisher, {
    dir: join(REPO, 'runtimes/node'),
    image: imageRef('runtime-node'),
  });
}, 240_000);

afterAll(async () => {
  for (const c of children) await c.sigkill().catch(() => undefined);
  for (const rl of opened) await rl.close().catch(() => undefined);
  await pds?.close();
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('pre-started one-shot sandboxes', () => {
  it('two executions never share a sandbox, a filesystem or a process: the second runs in a fresh pre-started one', async () => {
    const home = newHome('share');
    const rl = await open(home);
    const files = await publishFiles('files', { 'index.mjs': FILES_CODE });
    const first = await rl.execute({ uri: files.uri, handler: 'write', input: { secret: 's3cret' } });
    expect(first.failure).toBeUndefined();
    expect(first.output).toMatchObject({ wrote: true });
    expect(profileOf(first)).toMatchObject({ prestarted: false });
    const waiting = await poolReady(home);
    expect(waiting).not.toBe(containerOf(first));

    const second = await rl.execute({ uri: files.uri, handler: 'read', input: {} });
    expect(second.failure).toBeUndefined();
    // It ran in the sandbox that was waiting, and saw nothing of the first execution.
    expect(containerOf(second)).toBe(waiting);
    expect(profileOf(second)).toMatchObject({ prestarted: true, startMs: 0 });
    expect(second.output).toMatchObject({ file: null, leaked: null });
    expect((second.output as { host: string }).host).not.toBe((first.output as { host: string }).host);
    // Both containers are gone: each was used once, then removed (after execute() answered: idle() waits for it).
    await rl.idle();
    for (const id of [containerOf(first), containerOf(second)])
      expect(
        await docker
          .getContainer(id)
          .inspect()
          .catch(() => null),
      ).toBeNull();

    // A third call gets yet another sandbox (the one pre-started after the second), never the second's again.
    const third = await rl.execute({ uri: files.uri, handler: 'read', input: {} });
    expect(containerOf(third)).not.toBe(containerOf(second));
    expect(third.output).toMatchObject({ file: null, leaked: null });

    // Every pre-started sandbox is a fact in the log: started, then claimed by the execution that used it.
    const facts = await poolFacts(rl);
    const claimed = facts
      .filter((e) => e.type === 'pool.sandbox-claimed')
      .map((e) => e.data as { containerId: string; executionId: string });
    expect(claimed).toEqual(
      expect.arrayContaining([
        {
          sandbox: expect.any(String),
          containerId: containerOf(second),
          executionId: second.executionId,
          idleCpuMs: expect.any(Number),
        },
      ]),
    );
    expect(
      facts.some((e) => e.type === 'pool.sandbox-ready' && (e.data as { containerId: string }).containerId === waiting),
    ).toBe(true);
    // The execution's own events say which sandbox it ran in, and its profile.
    const started = (await rl.events(second.executionId)).find((e) => e.type === 'execution.started')!;
    expect(started.data).toMatchObject({ containerId: waiting, prestarted: true });

    await rl.close();
    // Closing removes what waits, and says so.
    expect(await prestartContainers(home)).toEqual([]);
    const reopened = await open(home);
    const removed = (await poolFacts(reopened))
      .filter((e) => e.type === 'pool.sandbox-removed')
      .map((e) => (e.data as { reason: string }).reason);
    expect(removed).toContain('shutdown');
    await reopened.close();
  });

  it('under the default policy a runtime whose publisher the operator has not named is never pre-started', async () => {
    const home = newHome('untrusted', { archive: { maxEntries: 19_977 } });
    const rl = await open(home);
    const files = await publishFiles('untrusted', { 'index.mjs': FILES_CODE });
    const out = await rl.execute({ uri: files.uri, handler: 'read', input: {} });
    expect(out.failure).toBeUndefined();
    await rl.idle();
    expect((await poolFacts(rl)).filter((e) => e.type === 'pool.sandbox-prestarting')).toEqual([]);
    expect(await prestartContainers(home)).toEqual([]);
    const again = await rl.execute({ uri: files.uri, handler: 'read', input: {} });
    expect(profileOf(again)).toMatchObject({ prestarted: false });
  });

  it('a code record changed between two calls is re-resolved: the sandbox started for the old one is removed, never served', async () => {
    const home = newHome('changed');
    const rl = await open(home);
    const v1 = await publishFiles('live', { 'index.mjs': "export const which = () => ({ version: 'v1' });\n" }, 'live');
    expect(await rl.execute({ uri: v1.uri, handler: 'which', input: {} })).toMatchObject({ output: { version: 'v1' } });
    const stale = await poolReady(home);
    const v2 = await publishFiles('live', { 'index.mjs': "export const which = () => ({ version: 'v2' });\n" }, 'live');
    expect(v2.uri).toBe(v1.uri);
    const out = await rl.execute({ uri: v1.uri, handler: 'which', input: {} });
    expect(out.output).toEqual({ version: 'v2' });
    expect((out.view.context as { resolved: { codeCid: string } }).resolved.codeCid).toBe(v2.cid);
    expect(containerOf(out)).not.toBe(stale);
    expect(profileOf(out)).toMatchObject({ prestarted: false });
    await until(
      'the stale sandbox removed',
      async () =>
        (await docker
          .getContainer(stale)
          .inspect()
          .catch(() => null)) === null,
      30_000,
    );
    const removal = (await poolFacts(rl)).find(
      (e) => e.type === 'pool.sandbox-removed' && (e.data as { containerId: string }).containerId === stale,
    );
    expect((removal?.data as { reason: string }).reason).toMatch(/^superseded/);
  });

  it('a runtime record changed under the code between two calls is refused; the waiting sandbox is not used', async () => {
    const home = newHome('runtime');
    const rl = await open(home);
    // A runtime of this test's own (same image), so changing it touches no other test.
    const own = await publishRuntime(publisher.publisher, {
      dir: join(REPO, 'runtimes/node'),
      image: imageRef('runtime-node'),
    });
    const codeRec = await publishFiles(
      'rt',
      { 'index.mjs': 'export const ok = () => ({ ok: true });\n' },
      undefined,
      own,
    );
    expect(await rl.execute({ uri: codeRec.uri, handler: 'ok', input: {} })).toMatchObject({ status: 'succeeded' });
    const waiting = await poolReady(home);
    // The publisher replaces the runtime record in place: its CID changes, the code's strong reference does not.
    const rkey = own.uri.split('/').at(-1)!;
    const current = (await (
      await fetch(
        `${pds.pdsUrl}/xrpc/com.atproto.repo.getRecord?repo=${publisher.did}&collection=${AT_RUN_V2.runtime}&rkey=${rkey}`,
      )
    ).json()) as { value: Record<string, unknown> };
    await publisher.publisher.putRecord(AT_RUN_V2.runtime, rkey, { ...current.value, description: 'changed' } as never);
    const out = await rl.execute({ uri: codeRec.uri, handler: 'ok', input: {} });
    expect(out.status).toBe('failed');
    expect(out.failure).toMatchObject({ reason: 'validation', code: 'RUNTIME_BINDING_MISMATCH' });
    expect((out.view.context as { containerId: string | null }).containerId).toBeNull();
    expect(
      (await poolFacts(rl)).some(
        (e) => e.type === 'pool.sandbox-claimed' && (e.data as { containerId: string }).containerId === waiting,
      ),
    ).toBe(false);
  });

  it('the deadline counts from the envelope: a sandbox that waited longer than the timeout still runs the call to completion', async () => {
    const home = newHome('deadline');
    const rl = await open(home);
    const timeoutMs = 4000;
    const code = await publishFiles('deadline', {
      'index.mjs':
        'export async function nap() { await new Promise((r) => setTimeout(r, 300)); return { napped: true }; }\n',
    });
    expect(await rl.execute({ uri: code.uri, handler: 'nap', input: {}, timeoutMs })).toMatchObject({
      status: 'succeeded',
    });
    const waiting = await poolReady(home);
    // Let it wait, started, for longer than the next call's whole timeout.
    const ready = (await poolFacts(rl)).find(
      (e) => e.type === 'pool.sandbox-ready' && (e.data as { containerId: string }).containerId === waiting,
    )!;
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(ready.at) + timeoutMs + 1000 - Date.now())));
    const out = await rl.execute({ uri: code.uri, handler: 'nap', input: {}, timeoutMs });
    expect(out.failure).toBeUndefined();
    expect(out.output).toEqual({ napped: true });
    expect(containerOf(out)).toBe(waiting);
    expect(profileOf(out)).toMatchObject({ prestarted: true });
    expect(profileOf(out).sandboxWaitedMs as number).toBeGreaterThan(timeoutMs);
  });

  it(
    'a supervisor SIGKILLed after the outcome is on disk, ' +
      'before the used container is removed, leaves nothing behind after its restart',
    async () => {
      const home = newHome('after-outcome');
      const code = await publishFiles('after-outcome', { 'index.mjs': 'export const ok = () => ({ ok: true });\n' });
      const child = startChild(
        { home, labels: LABELS, plcUrl: pds.plcUrl },
        { RUNLOG_FAULT: 'after-append', RUNLOG_FAULT_EVENT: 'execution.succeeded' },
      );
      children.push(child);
      expect(await child.ready).toBe(true);
      void child.send('execute', { uri: code.uri, handler: 'ok', input: {} });
      expect((await child.exited).signal).toBe('SIGKILL');
      const done = child.committed.find((c) => c.eventType === 'execution.succeeded');
      expect(done).toBeDefined();
      const executionId = done!.stream.slice('execution-'.length);
      // Killed with the outcome recorded and its cleanup not run: the used container is still there.
      const used = await homeContainers(home);
      expect(used.map((c) => c.Labels['runlog.stream'])).toContain(done!.stream);

      const rl = await open(home);
      expect(await rl.inspect(executionId)).toMatchObject({ state: 'succeeded' });
      expect(((await rl.inspect(executionId)).context as { result: { output: unknown } }).result.output).toEqual({
        ok: true,
      });
      expect(await homeContainers(home)).toEqual([]);
      await rl.close();
    },
  );

  it('a supervisor SIGKILLed with pre-started sandboxes leaves nothing behind after its restart', async () => {
    const home = newHome('killed');
    const code = await publishFiles('kill', { 'index.mjs': 'export const ok = () => ({ ok: true });\n' });
    const child = startChild({ home, labels: LABELS, plcUrl: pds.plcUrl });
    children.push(child);
    expect(await child.ready).toBe(true);
    const out = await child.request<{ status: string }>('execute', { uri: code.uri, handler: 'ok', input: {} });
    expect(out.status).toBe('succeeded');
    const waiting = await poolReady(home);
    await child.sigkill();
    // Killed: nothing removed it, it still runs.
    expect((await docker.getContainer(waiting).inspect()).State.Running).toBe(true);

    const rl = await open(home);
    expect(await prestartContainers(home)).toEqual([]);
    expect(await homeContainers(home)).toEqual([]);
    const removed = (await poolFacts(rl)).filter(
      (e) => e.type === 'pool.sandbox-removed' && (e.data as { containerId: string }).containerId === waiting,
    );
    expect(removed).toHaveLength(1);
    expect(removed[0]!.data).toMatchObject({ reason: 'supervisor-restart', recorded: true });
    // The restarted supervisor runs the code again (in a fresh sandbox) and pre-starts the next one.
    expect(await rl.execute({ uri: code.uri, handler: 'ok', input: {} })).toMatchObject({ status: 'succeeded' });
    await rl.close();
    expect(await homeContainers(home)).toEqual([]);
  });
});
