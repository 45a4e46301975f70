// One writer per log, with real supervisors (`runlog serve` processes), a real PRoot app (examples/hello-app)
// and real one-shot commands: a second supervisor — on the same port or another — and a one-shot `reconcile` or
// `exec` beside a running one are refused before they append anything or start anything; the refusal names the
// holder; kill -9 frees the lock; a stale server.json is recognised as stale.
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { holderPath, readHolder } from '../../../src/store/sqlite/writer-lock.ts';
import { HELLO_APP_DIR, alive, requireProot, until } from '../../support/apps.ts';
import { runCli, startServe, type Served } from '../../support/cli-process.ts';

const served: Served[] = [];
const roots: string[] = [];
afterAll(() => {
  for (const s of served) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

function actors(db: string): { id: string; state: string }[] {
  const s = new SqliteEventStore(db, { readOnly: true });
  try {
    return s.listActors({ all: true });
  } finally {
    s.close();
  }
}

function lastSeq(db: string): number {
  const s = new SqliteEventStore(db, { readOnly: true });
  try {
    return s.lastSeq();
  } finally {
    s.close();
  }
}

/** Host pids of the app's own process (the node server) for this instance id, seen through /proc. */
function appProcesses(instanceId: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'latin1').split('\0');
      if (argv[0]?.split('/').pop() !== 'node' || argv[1] !== 'server.mjs') continue;
      if (readFileSync(`/proc/${name}/environ`, 'latin1').split('\0').includes(`APP_INSTANCE_ID=${instanceId}`))
        pids.push(Number(name));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

async function serveOk(home: string, listen = '127.0.0.1:0'): Promise<Served & { info: NonNullable<Served['info']> }> {
  const s = await startServe(home, listen);
  served.push(s);
  if (!s.info) throw new Error(`runlog serve did not start:\n${s.stderr()}`);
  return s as Served & { info: NonNullable<Served['info']> };
}

describe('one writer per log', () => {
  it(
    'refuses a second supervisor (same port, other port), ' +
      'a one-shot reconcile/exec and a library supervisor, before touching anything; kill -9 frees the lock',
    { timeout: 600_000 },
    async () => {
      requireProot();
      const root = mkdtempSync(join(tmpdir(), 'runlog-1w-'));
      roots.push(root);
      const home = join(root, 'home');
      const db = join(home, 'runlog.db');
      const id = `k1-${process.pid}`;

      const a = await serveOk(home);
      // Created private, not chmod-ed after: the home 0700; the log, its WAL, the token, server.json and the lock 0600.
      const mode = (p: string) => statSync(p).mode & 0o777;
      expect(mode(home)).toBe(0o700);
      for (const f of [
        'runlog.db',
        'runlog.db-wal',
        'runlog.db-shm',
        'token',
        'server.json',
        'runlog.db.lock',
        'runlog.db.lock.json',
      ])
        expect(mode(join(home, f)), f).toBe(0o600);
      const spawned = runCli(['spawn', HELLO_APP_DIR, '--id', id, '--json'], { home });
      expect(spawned.code, spawned.stderr).toBe(0);
      expect(JSON.parse(spawned.stdout)).toMatchObject({ id, state: 'running' });
      const [appPid] = await until('the app process', () => (appProcesses(id).length === 1 ? appProcesses(id) : null));

      const seq = lastSeq(db);
      const serverJson = readFileSync(join(home, 'server.json'), 'utf8');
      expect(JSON.parse(serverJson)).toMatchObject({ pid: a.child.pid, url: a.info.url });
      expect(readHolder(db)).toMatchObject({ pid: a.child.pid, command: 'runlog serve', listen: a.info.url });

      // A second `runlog serve`, on the first one's port and on another: refused, naming the holder.
      for (const listen of [`127.0.0.1:${a.info.port}`, '127.0.0.1:0']) {
        const b = await startServe(home, listen);
        served.push(b);
        expect(b.info).toBeNull();
        expect(await b.exit).not.toBe(0);
        expect(b.output()).toContain('SUPERVISOR_RUNNING');
        expect(b.output()).toContain(`pid ${a.child.pid} (runlog serve, listening on ${a.info.url}) since `);
        expect(b.output()).not.toMatch(/EADDRINUSE|reconciled/);
      }

      // One-shot commands that would run in-process when no server.json is found (it was deleted, or the
      // supervisor has not written it yet): the lock still stops them.
      renameSync(join(home, 'server.json'), join(root, 'server.json.aside'));
      try {
        for (const args of [
          ['reconcile'],
          ['exec', 'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/dev.mainasara.at-run.beta.v2.code/x', 'greet'],
        ]) {
          const r = runCli(args, { home });
          expect(r.code, `${args[0]}: ${r.stderr}`).not.toBe(0);
          expect(r.stderr).toContain('SUPERVISOR_RUNNING');
          expect(r.stderr).toContain(`pid ${a.child.pid}`);
        }
        // The library in supervising mode, and a writable non-supervising one, in this process.
        await expect(createRunlog({ home, watchApps: false, log: () => undefined })).rejects.toMatchObject({
          code: 'SUPERVISOR_RUNNING',
          holder: { pid: a.child.pid },
        });
        await expect(createRunlog({ home, supervise: false, readOnly: false })).rejects.toMatchObject({
          code: 'SUPERVISOR_RUNNING',
        });
      } finally {
        renameSync(join(root, 'server.json.aside'), join(home, 'server.json'));
      }

      // Nothing was appended, server.json is still the first supervisor's, the app still runs once, as before.
      expect(lastSeq(db)).toBe(seq);
      expect(readFileSync(join(home, 'server.json'), 'utf8')).toBe(serverJson);
      expect(appProcesses(id)).toEqual([appPid]);
      const ps = runCli(['ps', '--json'], { home });
      expect(JSON.parse(ps.stdout)).toEqual([expect.objectContaining({ id, state: 'running' })]);
      // …and the first supervisor still answers through server.json.
      const inspected = runCli(['logs', id], { home });
      expect(inspected.code, inspected.stderr).toBe(0);

      // kill -9: the lock dies with the process; the leftover server.json and holder file are recognised as stale.
      a.child.kill('SIGKILL');
      await a.exit;
      await until('the app to die with its supervisor', () => !alive(appPid!));
      expect(existsSync(join(home, 'server.json'))).toBe(true);
      expect(existsSync(holderPath(db))).toBe(true);
      expect(readHolder(db)).toBeNull();
      const stale = runCli(['stop', id], { home });
      expect(stale.code).not.toBe(0);
      expect(stale.stderr).toContain('NO_SUPERVISOR');

      const c = await serveOk(home);
      expect(JSON.parse(readFileSync(join(home, 'server.json'), 'utf8'))).toMatchObject({
        pid: c.child.pid,
        url: c.info.url,
      });
      expect(readHolder(db)).toMatchObject({ pid: c.child.pid });
      // The new supervisor recorded the crash and its restart policy brings the app back: one process again.
      await until(
        'the instance to run again under the new supervisor',
        () => actors(db)[0]?.state === 'running',
        60_000,
        200,
      );
      expect(appProcesses(id)).toHaveLength(1);
      c.child.kill('SIGTERM');
      expect(await c.exit).toBe(0);
      expect(existsSync(join(home, 'server.json'))).toBe(false);
      expect(existsSync(holderPath(db))).toBe(false);
    },
  );
});
