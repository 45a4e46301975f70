// A hostile caller must never wedge or kill the supervisor. The real `runlog serve` process, run with
// --unhandled-rejections=strict (any unhandled rejection ends it), against a real PDS, Docker and the registry:
// deep, oversized and malformed inputs get 400/413 with typed errors; an honest execution in the same tick, and
// one running during a flood of bad ones, succeeds; the process is still up afterwards and stops cleanly. The
// library gets the inputs only it can be given (BigInt, circular, function) in a strict process of its own.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishCode } from '../../../src/supervisor/executions/publishing.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';
import { cliArgs } from '../../support/cli.ts';
import { publishNodeRuntime, startTestPds, type TestPds } from '../../support/pds.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const LIB_CHILD = resolve(import.meta.dirname, '../../fixtures/hostile-library-child.ts');
// The library child's containers and volumes: only this file's are cleaned up (the other int lane shares the daemon).
const LIB_LABELS = { ...TEST_LABELS, 'runlog.test-run': `hostile-${process.pid}-${Date.now()}` };
let pds: TestPds;
let uri: string;
let home: string;
let serve: ChildProcess;
let base: string;
let token: string;
let serveErr = '';
let exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
let hasExited = false;

const deepJson = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

async function post(body: string, timeoutMs = 120_000): Promise<{ status: number; json: any }> {
  const res = await fetch(`${base}api/executions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: res.status, json: await res.json() };
}

const honestBody = (name: string) => JSON.stringify({ uri, handler: 'greet', input: { name } });
const deepBody = () => `{"uri":${JSON.stringify(uri)},"handler":"greet","input":${deepJson(5000)}}`;

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  pds = await startTestPds();
  const runtimeUri = await publishNodeRuntime(pds, 'runtimes.test');
  const alice = await pds.createAccount('alice.test');
  uri = (
    await publishCode(alice.publisher, {
      dir: join(REPO, 'examples/greet-node'),
      runtime: runtimeUri,
      atproto: { plcUrl: pds.plcUrl },
    })
  ).uri;
  home = mkdtempSync(join(tmpdir(), 'runlog-hostile-'));
  serve = spawn(
    process.execPath,
    [
      '--unhandled-rejections=strict',
      ...cliArgs('serve', '--listen', '127.0.0.1:0', '--json', '--home', home, '--plc', pds.plcUrl),
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  serve.stderr!.on('data', (b: Buffer) => (serveErr += b.toString()));
  exited = new Promise((r) =>
    serve.on('exit', (code, signal) => {
      hasExited = true;
      r({ code, signal });
    }),
  );
  const info = await new Promise<{ url: string; tokenFile: string }>((ok, fail) => {
    // --json prints one (indented) JSON object once it listens.
    let text = '';
    const onData = (b: Buffer) => {
      text += b.toString();
      try {
        const v = JSON.parse(text) as { url: string; tokenFile: string };
        serve.stdout!.off('data', onData);
        ok(v);
      } catch {
        // not complete yet
      }
    };
    serve.stdout!.on('data', onData);
    void exited.then(({ code }) => fail(new Error(`runlog serve exited (${code}) before it was ready:\n${serveErr}`)));
  });
  base = info.url;
  token = readFileSync(info.tokenFile, 'utf8').trim();
}, 240_000);

afterAll(async () => {
  if (serve && !hasExited) {
    serve.kill('SIGKILL');
    await exited;
  }
  await pds?.close();
  const labels = { 'runlog.home': home };
  await cleanupTestContainers(labels);
  await cleanupTestVolumes(labels);
  await cleanupTestContainers(LIB_LABELS);
  await cleanupTestVolumes(LIB_LABELS);
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('runlog serve under hostile input (--unhandled-rejections=strict)', () => {
  it('a 5,000-level input (a 10 KB body) gets 400 INPUT_INVALID; nothing is appended for it', async () => {
    const r = await post(deepBody());
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({
      code: 'INPUT_INVALID',
      message: expect.stringMatching(/deeper than 128 levels/),
    });
    const actors = (await (
      await fetch(`${base}api/actors?all=1`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { actors: unknown[] };
    expect(actors.actors).toEqual([]);
  });

  it('an input over the policy gets 413 INPUT_TOO_LARGE, a body over the limit 413, a malformed timeout 400', async () => {
    const big = await post(JSON.stringify({ uri, handler: 'greet', input: 'x'.repeat(1024 * 1024 + 10) }));
    expect(big.status).toBe(413);
    expect(big.json.error.code).toBe('INPUT_TOO_LARGE');
    const huge = await post(JSON.stringify({ uri, handler: 'greet', input: 'x'.repeat(3 * 1024 * 1024) })).catch(
      (err: Error) => ({ status: 0, json: { error: { code: err.message } } }),
    );
    // The server answers 413 and closes the connection without reading the rest (a client may see the reset).
    if (huge.status !== 0) expect(huge).toMatchObject({ status: 413, json: { error: { code: 'PAYLOAD_TOO_LARGE' } } });
    const t = await post(JSON.stringify({ uri, handler: 'greet', timeoutMs: '10' }));
    expect(t.status).toBe(400);
  });

  it('a handler the code record does not list is refused before anything is pulled or started (HANDLER_NOT_FOUND)', async () => {
    const r = await post(JSON.stringify({ uri, handler: 'nope', input: {} }));
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ status: 'failed', failure: { reason: 'validation', code: 'HANDLER_NOT_FOUND' } });
    const events = (await (
      await fetch(`${base}api/actors/${r.json.executionId}/events`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { events: { type: string }[] };
    expect(events.events.map((e) => e.type)).toEqual(['execution.requested', 'execution.step', 'execution.failed']);
  });

  it('an honest execution sent in the same tick as deep ones succeeds', async () => {
    const requests = [post(honestBody('same-tick')), ...Array.from({ length: 20 }, () => post(deepBody()))];
    const [honest, ...bad] = await Promise.all(requests);
    expect(bad.every((b) => b.status === 400 && b.json.error.code === 'INPUT_INVALID')).toBe(true);
    expect(honest!.status, JSON.stringify(honest!.json)).toBe(200);
    expect(honest!.json).toMatchObject({ status: 'succeeded', output: { greeting: 'Hello, same-tick!' } });
  }, 120_000);

  it('an honest execution running during a flood of bad ones succeeds', async () => {
    const honest = post(honestBody('flood'));
    let bad = 0;
    const flood = (async () => {
      for (let round = 0; round < 10; round++) {
        const rs = await Promise.all(Array.from({ length: 20 }, () => post(deepBody())));
        bad += rs.filter((r) => r.status === 400 && r.json.error.code === 'INPUT_INVALID').length;
      }
    })();
    const [h] = await Promise.all([honest, flood]);
    expect(bad).toBe(200);
    expect(h.status, JSON.stringify(h.json)).toBe(200);
    expect(h.json).toMatchObject({ status: 'succeeded', output: { greeting: 'Hello, flood!' } });
  }, 180_000);

  it('is still up afterwards, and stops cleanly when asked (it never exits on its own)', async () => {
    await new Promise((r) => setTimeout(r, 2000));
    expect(hasExited, serveErr).toBe(false);
    const health = (await (
      await fetch(`${base}api/health`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { ok: boolean };
    expect(health.ok).toBe(true);
    expect(serveErr).not.toMatch(/unhandled|UnhandledPromiseRejection/i);
    serve.kill('SIGTERM');
    expect(await exited).toEqual({ code: 0, signal: null });
  }, 60_000);
});

describe('the library under hostile input (--unhandled-rejections=strict)', () => {
  it(
    'BigInt, circular, deep and function inputs are refused with INPUT_INVALID; ' +
      'an honest execution in the same tick succeeds',
    async () => {
      const libHome = mkdtempSync(join(tmpdir(), 'runlog-hostile-lib-'));
      try {
        const child = spawn(
          process.execPath,
          [
            '--unhandled-rejections=strict',
            '--import',
            'tsx',
            LIB_CHILD,
            JSON.stringify({ home: libHome, plcUrl: pds.plcUrl, uri, labels: LIB_LABELS }),
          ],
          {
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        );
        let out = '';
        let err = '';
        child.stdout.on('data', (b: Buffer) => (out += b.toString()));
        child.stderr.on('data', (b: Buffer) => (err += b.toString()));
        const code = await new Promise<number | null>((r) => child.on('exit', r));
        expect(code, err).toBe(0);
        const report = JSON.parse(out.trim()) as {
          bad: { kind: string; code: string }[];
          honest: { status: string; output: unknown };
          live: number;
        };
        expect(report.bad).toEqual([
          { kind: 'bigint', code: 'INPUT_INVALID' },
          { kind: 'circular', code: 'INPUT_INVALID' },
          { kind: 'deep', code: 'INPUT_INVALID' },
          { kind: 'function', code: 'INPUT_INVALID' },
        ]);
        expect(report.honest).toMatchObject({ status: 'succeeded', output: { greeting: 'Hello, Ada!' } });
        expect(report.live).toBe(0);
      } finally {
        rmSync(libHome, { recursive: true, force: true });
      }
    },
    180_000,
  );
});
