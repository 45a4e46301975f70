// PostgreSQL restarting under a cluster: a throwaway PostgreSQL cluster of this test's own (support/pg-cluster.ts,
// never the shared server), two real supervisors (`runlog serve --store … --node a|b`) each with a live PRoot app.
// The server is stopped (pg_ctl stop -m fast, then -m immediate: no shutdown checkpoint, crash recovery at the
// next start) and started again. While it is down: a spawn is refused with a typed error (STORE_UNAVAILABLE) and
// leaves nothing behind, `ps` says the same, and an app that crashes meanwhile is not forgotten. Afterwards: both
// supervisors are still there and answer; heartbeats and leases resume (same owners, no takeover); the crash is
// recorded once and the app runs again (once); a new spawn works; the log is consistent — positions gapless,
// every stream's versions gapless, no event twice, and the actors projection equals a fold of the events.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { actorsProjection } from '../src/actors/actors-projection.ts';
import type { RecordedEvent } from '../src/domain/events.ts';
import { alive, HELLO_APP_DIR, requireProot, until } from './support/apps.ts';
import { runCli, startServe, type Served } from './support/cli-process.ts';
import { startThrowawayPostgres, type ThrowawayPostgres } from './support/pg-cluster.ts';

// Longer than any outage here: the leases must survive it (a takeover is another test's subject).
const TTL = 120_000;
const served: Served[] = [];
const roots: string[] = [];
let server: ThrowawayPostgres | undefined;
afterAll(() => {
  for (const s of served) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  server?.destroy();
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

interface Node {
  name: string;
  home: string;
  s: Served;
}

async function startNode(root: string, name: string, store: string): Promise<Node> {
  const home = join(root, name);
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const s = await startServe(home, '127.0.0.1:0', ['--store', store, '--node', name, '--lease-ttl', String(TTL)]);
  served.push(s);
  if (!s.info) throw new Error(`runlog serve --node ${name} did not start:\n${s.stderr()}`);
  return { name, home, s };
}

async function query<R>(url: string, text: string, params: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('SET search_path TO runlog');
    return (await c.query(text, params)).rows as R[];
  } finally {
    await c.end();
  }
}

describe('PostgreSQL restarting under a cluster', () => {
  it('pg_ctl stop -m fast, then -m immediate, and start: supervisors survive, appends meanwhile fail typed and lose nothing, leases and heartbeats resume, the log stays consistent', { timeout: 600_000 }, async () => {
    requireProot();
    server = startThrowawayPostgres();
    const root = mkdtempSync(join(tmpdir(), 'runlog-pgrestart-'));
    roots.push(root);
    const store = server.url;
    const cliEnv = { env: { RUNLOG_HOME: join(root, 'nowhere') } };
    const a = await startNode(root, 'a', store);
    const b = await startNode(root, 'b', store);
    const spawnOn = (n: Node, id: string) => runCli(['spawn', HELLO_APP_DIR, '--sandbox', 'proot', '--id', id, '--json'], { home: n.home, timeoutMs: 120_000 });
    const history = (id: string): RecordedEvent[] => {
      const r = runCli(['events', id, '--json', '--store', store], cliEnv);
      if (r.code !== 0) throw new Error(`events ${id}: ${r.stderr}`);
      return r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    };
    const pidOf = (id: string): number => history(id).filter((e) => e.type === 'instance.spawned').at(-1)!.data.pid as number;
    const ia = `pa-${process.pid}`;
    const ib = `pb-${process.pid}`;
    for (const [n, id] of [[a, ia], [b, ib]] as const) {
      const r = spawnOn(n, id);
      expect(r.code, r.stderr).toBe(0);
    }
    const leases = () => query<{ stream: string; node: string; token: string }>(store, 'SELECT stream, node, token FROM leases WHERE stream = ANY($1) ORDER BY stream', [[`instance-${ia}`, `instance-${ib}`]]);
    const leasesBefore = await leases();
    expect(leasesBefore.map((l) => [l.stream, l.node])).toEqual([
      [`instance-${ia}`, 'a'],
      [`instance-${ib}`, 'b'],
    ]);
    const pidB = pidOf(ib);

    for (const [round, mode] of (['fast', 'immediate'] as const).entries()) {
      const pidA = pidOf(ia);
      const crashesBefore = history(ia).filter((e) => e.type === 'instance.crashed').length;
      server.stop(mode);
      // While PostgreSQL is down: a spawn is refused, typed, and leaves nothing behind.
      const refusedId = `refused${round}-${process.pid}`;
      const refused = spawnOn(a, refusedId);
      expect(refused.code, refused.stdout + refused.stderr).not.toBe(0);
      expect(refused.stdout + refused.stderr).toContain('STORE_UNAVAILABLE');
      const ps = runCli(['ps', '--json', '--store', store], cliEnv);
      expect(ps.code).not.toBe(0);
      expect(ps.stderr).toContain('STORE_UNAVAILABLE');
      // An app that dies meanwhile: its supervisor cannot record the crash yet, and must not forget it.
      process.kill(pidA, 'SIGKILL');
      await until(`a's app ${pidA} is gone`, () => !alive(pidA), 10_000, 50);
      await new Promise((r) => setTimeout(r, 3000));
      server.start();

      // Afterwards: the supervisors are still there, the crash is recorded once and the app runs again.
      for (const n of [a, b]) expect(n.s.child.exitCode, `${n.name}: ${n.s.stderr().slice(-2000)}`).toBeNull();
      const after = await until(`the crash of ${ia} recorded and the app running again`, () => {
        const h = history(ia);
        return h.at(-1)?.type === 'instance.running' && h.filter((e) => e.type === 'instance.crashed').length > crashesBefore ? h : null;
      }, 120_000, 300).catch((err: Error) => {
        throw new Error(`${err.message}\nevents: ${JSON.stringify(history(ia).slice(-6))}\na: ${a.s.stderr().slice(-3000)}`);
      });
      expect(after.filter((e) => e.type === 'instance.crashed')).toHaveLength(crashesBefore + 1);
      const newPid = pidOf(ia);
      expect(newPid).not.toBe(pidA);
      expect(alive(newPid)).toBe(true);
      // b's app ran through it untouched.
      expect(pidOf(ib)).toBe(pidB);
      expect(alive(pidB)).toBe(true);
      // The refused spawn left nothing: no event, no stream.
      expect(runCli(['events', refusedId, '--json', '--store', store], cliEnv).code).not.toBe(0);
      // Heartbeats resume (both nodes live again), leases are the same owners' with the same tokens (no takeover).
      await until('both nodes beat again', () => {
        const v = JSON.parse(runCli(['nodes', '--json', '--store', store], cliEnv).stdout || '{"nodes":[]}');
        return v.nodes.length === 2 && v.nodes.every((n: any) => n.live && n.ageMs < 5000 * 2) ? v : null;
      }, 60_000, 500);
      expect(await leases(), `events: ${JSON.stringify(history(ia).slice(-8), null, 1)}\na: ${a.s.stderr().slice(-4000)}\nb: ${b.s.stderr().slice(-4000)}`).toEqual(leasesBefore);
      // A spawn works again.
      const fresh = spawnOn(b, `after${round}-${process.pid}`);
      expect(fresh.code, fresh.stderr).toBe(0);
    }

    // The log is consistent: positions gapless, each stream's versions gapless, no event twice, and the actors
    // projection equals a fold of the events.
    const all = runCli(['events', '--all', '--json', '--store', store], cliEnv).stdout.trim().split('\n').map((l) => JSON.parse(l) as RecordedEvent);
    expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i + 1));
    const byStream = new Map<string, RecordedEvent[]>();
    for (const e of all) byStream.set(e.stream, [...(byStream.get(e.stream) ?? []), e]);
    for (const [s, events] of byStream) expect(events.map((e) => e.version), s).toEqual(events.map((_, i) => i + 1));
    const fingerprints = all.map((e) => `${e.stream} ${e.type} ${e.at} ${JSON.stringify(e.data)}`);
    expect(new Set(fingerprints).size).toBe(fingerprints.length);
    const projection = actorsProjection();
    const docs = await query<{ id: string; doc: any }>(store, "SELECT id, doc FROM projection_documents WHERE projection = 'actors' ORDER BY id");
    const actorStreams = [...byStream.keys()].filter((s) => /^(instance|execution)-/.test(s)).sort();
    expect(docs.map((d) => d.id)).toEqual(actorStreams);
    for (const d of docs) {
      const folded = byStream.get(d.id)!.reduce<any>((doc, e) => projection.evolve(doc, e), null);
      const { snapshot: _s, rev: _r, ...want } = folded;
      const { snapshot: _s2, rev: _r2, ...got } = d.doc;
      expect(got, d.id).toEqual(want);
    }
    for (const n of [a, b]) n.s.child.kill('SIGTERM');
    for (const n of [a, b]) expect(await n.s.exit).toBe(0);
  });
});
