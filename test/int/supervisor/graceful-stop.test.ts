// A graceful stop of `runlog serve` (SIGTERM), as an operator does it, with real PRoot instances: the instances
// die with their supervisor, but that is recorded as a suspension, not as the app's crash, so restarts do not
// spend the crash budget; a kill -9 of the supervisor still counts a crash. And a SIGTERM while a spawn is in
// flight ends the process promptly with its log closed cleanly. Real processes throughout (support/cli-process.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import type { InstanceContext } from '../../../src/machines/instance.machine.ts';
import { readShutdownRecord } from '../../../src/store/sqlite/shutdown-record.ts';
import { HELLO_APP_DIR, requireProot, until } from '../../support/apps.ts';
import { cliArgs } from '../../support/cli.ts';
import { REPO_ROOT, runCli, startServe, type Served } from '../../support/cli-process.ts';
import { freshDirs } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const children: ChildProcess[] = [];
const alive = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;
afterEach(() => {
  for (const c of children.splice(0)) if (alive(c)) c.kill('SIGKILL');
});
const dir = freshDirs('runlog-graceful-');

beforeAll(() => requireProot());

async function serve(home: string): Promise<Served> {
  const s = await startServe(home);
  children.push(s.child);
  if (!s.info) throw new Error(`runlog serve did not start:\n${s.output()}`);
  return s;
}

/** The instance as the log has it, read by a fresh read-only opening (the supervisor keeps writing meanwhile). */
async function instance(
  home: string,
  id: string,
): Promise<{ state: string; context: InstanceContext; events: { type: string; data: Record<string, unknown> }[] }> {
  const rl = await createRunlog({ home, supervise: false });
  try {
    const view = await rl.inspect(id);
    return {
      state: view.state,
      context: view.context as InstanceContext,
      events: (await rl.events(id)).map((e) => ({ type: e.type, data: e.data as Record<string, unknown> })),
    };
  } finally {
    await rl.close();
  }
}

const untilState = (home: string, id: string, ok: (s: Awaited<ReturnType<typeof instance>>) => boolean, what: string) =>
  until(
    what,
    async () => {
      const s = await instance(home, id);
      return ok(s) ? s : null;
    },
    60_000,
    200,
  );

/** hello-app with a crash budget of one restart: two crashes in a row end it crashed.down. */
function appWithBudget(root: string, entrypoint?: string): string {
  const app = join(root, 'app');
  cpSync(HELLO_APP_DIR, app, { recursive: true, dereference: true });
  const manifest = JSON.parse(readFileSync(join(app, 'runlog.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(
    join(app, 'runlog.json'),
    JSON.stringify({
      ...manifest,
      restart: { policy: 'on-failure', maxRestarts: 1, backoffMs: 200, maxBackoffMs: 1000 },
    }),
  );
  if (entrypoint) writeFileSync(join(app, 'entrypoint.sh'), entrypoint, { mode: 0o755 });
  return app;
}

describe('runlog serve stopped gracefully', () => {
  it(
    'SIGTERM restarts leave a PRoot instance running with its crash budget untouched; a kill -9 still counts a crash',
    { timeout: 240_000 },
    async () => {
      const root = dir();
      const home = join(root, 'home');
      const app = appWithBudget(root);
      let s = await serve(home);
      const spawned = runCli(['spawn', app, '--id', 'inst_graceful', '--json'], { home });
      expect(spawned.code, spawned.stderr).toBe(0);

      // Two graceful restarts: with a budget of one restart, two crashes would have ended it crashed.down.
      for (let round = 1; round <= 2; round++) {
        s.child.kill('SIGTERM');
        expect(await s.exit, s.output()).toBe(0);
        expect((await instance(home, 'inst_graceful')).state).toBe('suspended');
        s = await serve(home);
        await untilState(
          home,
          'inst_graceful',
          (i) => i.state === 'running' && i.events.filter((e) => e.type === 'instance.suspended').length === round,
          `running again after graceful restart ${round}`,
        );
      }
      const after = await instance(home, 'inst_graceful');
      expect(after.events.filter((e) => e.type === 'instance.suspended')).toMatchObject([
        { data: { reason: 'supervisor-stop' } },
        { data: { reason: 'supervisor-stop' } },
      ]);
      expect(after.events.map((e) => e.type)).not.toContain('instance.crashed');
      expect(after.context).toMatchObject({ restarts: 0, lastCrash: null });

      // kill -9: nothing is recorded as it dies, so its next start counts a crash (and restarts it: one of one).
      s.child.kill('SIGKILL');
      await s.exit;
      s = await serve(home);
      const crashed = await untilState(
        home,
        'inst_graceful',
        (i) => i.state === 'running' && i.context.restarts === 1,
        'running again after the crash',
      );
      expect(crashed.context.lastCrash).toMatchObject({ reason: 'supervisor-restart' });
      expect(crashed.events.filter((e) => e.type === 'instance.crashed')).toHaveLength(1);
      s.child.kill('SIGTERM');
      expect(await s.exit).toBe(0);
    },
  );

  it(
    'SIGTERM while a spawn waits for a health check that never answers: the process exits promptly, its log closed cleanly',
    { timeout: 120_000 },
    async () => {
      const root = dir();
      const home = join(root, 'home');
      const app = appWithBudget(root, '#!/bin/bash\nexec sleep 600\n');
      const s = await serve(home);
      const client = spawn(process.execPath, cliArgs('spawn', app, '--id', 'inst_inflight', '--json'), {
        cwd: REPO_ROOT,
        env: { ...process.env, RUNLOG_HOME: home },
        stdio: 'ignore',
      });
      children.push(client);
      await untilState(home, 'inst_inflight', (i) => i.state === 'spawning', 'the spawn to be in flight');

      s.child.kill('SIGTERM');
      // A generous bound: the shutdown waits for nothing that is not cancelled or bounded (a spawn's wait is a minute).
      const BOUND_MS = 15_000;
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        s.exit.then((code) => ({ exited: code })),
        new Promise<'still running'>((r) => (timer = setTimeout(() => r('still running'), BOUND_MS))),
      ]);
      clearTimeout(timer);
      expect(outcome, s.output()).toEqual({ exited: 0 });
      expect(s.stderr()).not.toMatch(/still (running|shutting down)/);
      // Closed cleanly: the shutdown record and the heartbeat's stop mark are written; the spawn was suspended, not crashed.
      const rl = await createRunlog({ home, supervise: false });
      try {
        expect(readShutdownRecord(rl.dbPath)).not.toBeNull();
        expect((await runlogInternals(rl).store.readHeartbeat())?.stoppedAt).toEqual(expect.any(String));
        expect((await rl.inspect('inst_inflight')).state).toBe('suspended');
      } finally {
        await rl.close();
      }
    },
  );
});
