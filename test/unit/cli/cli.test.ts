import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { main } from '../../../src/cli/main.ts';
import { cliArgs } from '../../support/cli.ts';
import { capture } from '../../support/cli-in-process.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const spec: InstanceSpec = {
  instanceId: 'inst_a',
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'never', maxRestarts: 0, backoffMs: 1, maxBackoffMs: 1, resetAfterMs: 1 },
};

describe('runlog CLI (reads the SQLite file directly)', () => {
  let db: string;
  beforeEach(async () => {
    const home = tempDir();
    db = join(home, 'runlog.db');
    // Write a history (no effects run), then close the log: the CLI works post-mortem.
    const rl = await createRunlog({ home, supervise: false, readOnly: false });
    await runlogInternals(rl).host.create('instance', 'inst_a', { type: 'instance.requested', data: { spec } });
    await rl.send('instance', 'inst_a', { type: 'instance.spawned', data: { pid: 7, host: '127.0.0.1', port: 4100 } });
    await rl.send('instance', 'inst_a', { type: 'instance.healthy', data: { identity: 'match' } });
    await rl.send('instance', 'inst_a', { type: 'instance.running', data: {} });
    await runlogInternals(rl).host.create('instance', 'inst_b', {
      type: 'instance.requested',
      data: { spec: { ...spec, instanceId: 'inst_b' } },
    });
    await rl.send('instance', 'inst_b', { type: 'instance.stop-requested', data: {} });
    await rl.send('instance', 'inst_b', { type: 'instance.exited', data: { exitCode: 0 } });
    await rl.close();
  });

  it('ps lists live actors; --all includes finished ones; --json has stable keys', async () => {
    const c = capture();
    expect(await main(['ps', '--db', db], c.factory)).toBe(0);
    expect(c.stdout()).toMatch(/inst_a\s+instance\s+running/);
    expect(c.stdout()).not.toContain('inst_b');
    const j = capture();
    expect(await main(['ps', '--all', '--json', '--db', db], j.factory)).toBe(0);
    const rows = JSON.parse(j.stdout());
    expect(rows.map((r: any) => [r.id, r.state, r.status])).toEqual([
      ['inst_a', 'running', 'active'],
      ['inst_b', 'stopped', 'terminal'],
    ]);
    expect(Object.keys(rows[0]).sort()).toEqual([
      'archived',
      'createdAt',
      'heartbeatAt',
      'id',
      'kind',
      'state',
      'status',
      'summary',
      'supervised',
      'updatedAt',
      'version',
    ]);
    // No supervisor ever ran on this log: the live state is only the last one recorded, and ps says so.
    expect(rows[0]).toMatchObject({ supervised: false, heartbeatAt: null });
    expect(c.stdout()).toMatch(/inst_a\s+instance\s+running \(last known\)/);
    expect(c.stderr()).toContain('no supervisor has run on this log');
  });

  it('inspect prints state and context; unknown ids exit 1', async () => {
    const j = capture();
    expect(await main(['inspect', 'inst_a', '--json', '--db', db], j.factory)).toBe(0);
    expect(JSON.parse(j.stdout())).toMatchObject({
      id: 'inst_a',
      kind: 'instance',
      state: 'running',
      version: 4,
      context: { pid: 7, port: 4100 },
    });
    const n = capture();
    expect(await main(['inspect', 'inst_zzz', '--db', db], n.factory)).toBe(1);
    expect(n.err.join('\n')).toContain('NOT_FOUND');
    const nj = capture();
    expect(await main(['inspect', 'inst_zzz', '--json', '--db', db], nj.factory)).toBe(1);
    expect(nj.out).toEqual([]);
    expect(JSON.parse(nj.err.join('\n'))).toMatchObject({ error: { code: 'NOT_FOUND' } });
  });

  it('events prints one stream or the whole log, with ranges', async () => {
    const j = capture();
    expect(await main(['events', 'inst_a', '--json', '--from', '2', '--to', '3', '--db', db], j.factory)).toBe(0);
    expect(j.out.map((l) => JSON.parse(l).type)).toEqual(['instance.spawned', 'instance.healthy']);
    const all = capture();
    expect(await main(['events', '--all', '--json', '--db', db], all.factory)).toBe(0);
    expect(all.out).toHaveLength(7);
  });

  it('replay prints every transition, and state+context at --to', async () => {
    const c = capture();
    expect(await main(['replay', 'inst_a', '--db', db], c.factory)).toBe(0);
    expect(c.out).toHaveLength(4);
    expect(c.out[2]).toMatch(/instance\.healthy\s+spawning → healthy\s+effects: callLifecycle/);
    const j = capture();
    expect(await main(['replay', 'inst_a', '--to', '2', '--json', '--db', db], j.factory)).toBe(0);
    expect(JSON.parse(j.stdout())).toMatchObject({ to: 2, state: 'spawning', context: { pid: 7 } });
  });

  it('replay --to past the last event is a usage error (REPLAY_TO_INVALID, exit 2), from the log and from an exported file', async () => {
    const c = capture();
    expect(await main(['replay', 'inst_a', '--to', '9', '--json', '--db', db], c.factory)).toBe(2);
    expect(JSON.parse(c.stderr())).toMatchObject({
      error: { code: 'REPLAY_TO_INVALID', message: 'inst_a has 4 events; cannot replay to 9' },
    });
    const x = capture();
    expect(await main(['export', 'inst_a', '--db', db], x.factory)).toBe(0);
    const file = join(tempDir(), 'inst_a.jsonl');
    writeFileSync(file, `${x.out.join('\n')}\n`);
    const f = capture();
    expect(await main(['replay', '--file', file, '--to', '9', '--json'], f.factory)).toBe(2);
    expect(JSON.parse(f.stderr())).toMatchObject({ error: { code: 'REPLAY_TO_INVALID' } });
  });

  it('rebuild recomputes the projection', async () => {
    const j = capture();
    expect(await main(['rebuild', '--json', '--db', db], j.factory)).toBe(0);
    expect(JSON.parse(j.stdout())).toEqual({ actors: 2, events: 7 });
  });

  it('usage errors exit 2 with the usage line', async () => {
    const c = capture();
    expect(await main(['replay', '--db', db], c.factory)).toBe(2);
    expect(c.err.join('\n')).toContain('usage: runlog replay');
    const u = capture();
    expect(await main(['frobnicate'], u.factory)).toBe(2);
    const r = capture();
    expect(await main(['replay', 'inst_a', '--to', 'x', '--db', db], r.factory)).toBe(2);
  });

  it("--version prints package.json's version and exits 0", async () => {
    const c = capture();
    expect(await main(['--version'], c.factory)).toBe(0);
    const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '../../../package.json'), 'utf8')) as {
      version: string;
    };
    expect(c.out).toEqual([pkg.version]);
    expect(pkg.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('a corrupt log file gives a clear error naming it (exit 4)', async () => {
    const bad = join(tempDir(), 'bad.db');
    execFileSync('sh', ['-c', `head -c 4096 /dev/urandom > ${bad}`]);
    const c = capture();
    expect(await main(['ps', '--db', bad], c.factory)).toBe(4);
    expect(c.err.join('\n')).toMatch(new RegExp(`STORE_CORRUPT: event log ${bad} is damaged`));
  });

  it('the CLI works as a separate process: data on stdout, exit codes', () => {
    const ok = spawnSync(process.execPath, cliArgs('ps', '--json', '--db', db), { encoding: 'utf8' });
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout)[0].id).toBe('inst_a');
    const missing = spawnSync(process.execPath, cliArgs('inspect', 'nope', '--db', db), { encoding: 'utf8' });
    expect(missing.status).toBe(1);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toContain('not found');
  }, 60_000); // two processes that load the TypeScript sources through tsx: seconds each on a loaded machine
});
