// A supervisor on PostgreSQL, as a user runs it: `runlog serve --store postgres://…` (a real process), a real
// container app (examples/hello-app under Docker), and the one-shot inspection commands reading the same log
// with --store (or $RUNLOG_STORE): ps, inspect, events (and --follow while the app is stopped), replay, export.
// A second supervisor started on the same log afterwards finds everything the first acknowledged.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HELLO_APP_DIR, requireDockerAppBase, until } from '../../support/apps.ts';
import { cliArgs } from '../../support/cli.ts';
import { REPO_ROOT, runCli, startServe, type Served } from '../../support/cli-process.ts';
import { cleanupTestContainers } from '../../support/docker.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';

const served: Served[] = [];
const roots: string[] = [];
let url = '';
let home = '';
afterAll(async () => {
  for (const s of served) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  if (home) await cleanupTestContainers({ 'runlog.home': home });
  for (const r of roots) rmSync(r, { recursive: true, force: true });
  if (url) await dropSchemas(url);
});

async function serveOk(store: string): Promise<Served & { info: NonNullable<Served['info']> }> {
  const s = await startServe(home, '127.0.0.1:0', ['--store', store]);
  served.push(s);
  if (!s.info) throw new Error(`runlog serve --store did not start:\n${s.stderr()}`);
  return s as Served & { info: NonNullable<Served['info']> };
}

/** A one-shot command with no home of its own: everything it knows comes from the store URL. */
function cli(args: string[], env: Record<string, string> = {}) {
  const r = runCli(args, { env: { RUNLOG_HOME: join(home, 'nowhere'), ...env } });
  return r;
}

const jsonLines = (text: string): any[] =>
  text
    .split('\n')
    .filter((l) => l.trim().length > 0)
    .map((l) => JSON.parse(l));

describe('a supervisor on PostgreSQL', () => {
  it(
    'serve --store runs a container app; ps, inspect, events --follow, ' +
      'replay and export read the same log; a second supervisor finds it all',
    { timeout: 600_000 },
    async () => {
      await requireDockerAppBase();
      url = await requirePostgres();
      const root = mkdtempSync(join(tmpdir(), 'runlog-pgsup-'));
      roots.push(root);
      home = join(root, 'home');
      mkdirSync(home, { mode: 0o700 });
      const store = `${url}?schema=${testSchema('serve')}`;
      const id = `pg-${process.pid}`;

      const a = await serveOk(store);
      expect(a.info.db).not.toContain(':runlog@'); // the password never shows
      const spawned = runCli(['spawn', HELLO_APP_DIR, '--sandbox', 'container', '--id', id, '--json'], {
        home,
        timeoutMs: 240_000,
      });
      expect(spawned.code, spawned.stderr).toBe(0);
      expect(JSON.parse(spawned.stdout)).toMatchObject({ id, state: 'running' });
      // Nothing went to a SQLite file.
      expect(existsSync(join(home, 'runlog.db'))).toBe(false);

      // ps: by --store, and by $RUNLOG_STORE.
      for (const r of [cli(['ps', '--store', store, '--json']), cli(['ps', '--json'], { RUNLOG_STORE: store })]) {
        expect(r.code, r.stderr).toBe(0);
        const rows = JSON.parse(r.stdout);
        expect(rows).toEqual([
          expect.objectContaining({
            id,
            kind: 'instance',
            state: 'running',
            status: 'active',
            version: 4,
            supervised: true,
          }),
        ]);
      }
      const inspected = cli(['inspect', id, '--store', store, '--json']);
      expect(inspected.code, inspected.stderr).toBe(0);
      expect(JSON.parse(inspected.stdout)).toMatchObject({
        id,
        state: 'running',
        version: 4,
        supervision: { supervised: true },
      });
      const events = cli(['events', id, '--store', store, '--json']);
      expect(events.code, events.stderr).toBe(0);
      expect(jsonLines(events.stdout).map((e) => e.type)).toEqual([
        'instance.requested',
        'instance.spawned',
        'instance.healthy',
        'instance.running',
      ]);

      // events --follow prints the stop as the supervisor records it, and ends when the instance has ended.
      const follower = spawn(process.execPath, cliArgs('events', id, '--follow', '--json', '--store', store), {
        cwd: REPO_ROOT,
        env: { ...process.env, RUNLOG_HOME: join(home, 'nowhere') },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let followed = '';
      let followErr = '';
      follower.stdout.on('data', (c: Buffer) => (followed += c.toString()));
      follower.stderr.on('data', (c: Buffer) => (followErr += c.toString()));
      await until('the follower printed the history', () => jsonLines(followed).length >= 4, 60_000);
      const stopped = runCli(['stop', id, '--json'], { home });
      expect(stopped.code, stopped.stderr).toBe(0);
      expect(JSON.parse(stopped.stdout)).toMatchObject({ id, state: 'stopped' });
      // Bounded, so a follower that missed the end fails here with what it printed, not at the test's timeout.
      await until('the follower ended', () => follower.exitCode !== null || follower.signalCode !== null, 60_000).catch(
        (err: unknown) => {
          follower.kill('SIGKILL');
          throw new Error(`${String(err)}\nprinted:\n${followed}\nstderr:\n${followErr}`);
        },
      );
      expect(follower.exitCode, followErr).toBe(0);
      const all = jsonLines(followed);
      expect(all.map((e) => e.version)).toEqual(all.map((_, i) => i + 1)); // each event once, in order
      expect(all.slice(-2).map((e) => e.type)).toEqual(['instance.stop-requested', 'instance.exited']);

      const replayed = cli(['replay', id, '--store', store, '--json']);
      expect(replayed.code, replayed.stderr).toBe(0);
      expect(replayed.stdout).toContain('"stopped"');
      const exported = cli(['export', id, '--store', store]);
      expect(exported.code, exported.stderr).toBe(0);
      const [header, ...history] = jsonLines(exported.stdout);
      expect(header).toMatchObject({ runlog: 'history', kind: 'instance', id, version: all.length });
      expect(history.map((e) => e.seq)).toEqual(all.map((e) => e.seq));
      const file = join(root, 'history.jsonl');
      writeFileSync(file, exported.stdout);
      const offline = cli(['replay', '--file', file, '--json']);
      expect(offline.code, offline.stderr).toBe(0);
      expect(offline.stdout).toContain('"stopped"');
      // rebuild is SQLite's: said plainly, nothing written.
      const rebuild = cli(['rebuild', '--store', store]);
      expect(rebuild.code).not.toBe(0);
      expect(rebuild.stderr).toContain('PostgreSQL');

      // A clean stop, then another supervisor on the same log: everything acknowledged is there, ended as it was.
      a.child.kill('SIGTERM');
      expect(await a.exit).toBe(0);
      const ps0 = cli(['ps', '--store', store, '--json']);
      expect(ps0.code, ps0.stderr).toBe(0);
      expect(ps0.stdout.trim()).toBe('[]');
      const b = await serveOk(store);
      const second = runCli(['spawn', HELLO_APP_DIR, '--sandbox', 'container', '--id', `${id}b`, '--json'], {
        home,
        timeoutMs: 240_000,
      });
      expect(second.code, second.stderr).toBe(0);
      const psAll = cli(['ps', '--all', '--store', store, '--json']);
      expect(psAll.code, psAll.stderr).toBe(0);
      expect(JSON.parse(psAll.stdout).map((r: any) => [r.id, r.state])).toEqual([
        [id, 'stopped'],
        [`${id}b`, 'running'],
      ]);
      const k = runCli(['kill', `${id}b`, '--json'], { home });
      expect(k.code, k.stderr).toBe(0);
      b.child.kill('SIGTERM');
      expect(await b.exit).toBe(0);
      const history2 = cli(['events', '--all', '--store', store, '--json']);
      expect(jsonLines(history2.stdout).map((e) => e.seq)).toEqual(jsonLines(history2.stdout).map((_, i) => i + 1)); // gapless
    },
  );
});
