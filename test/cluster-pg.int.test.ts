// A cluster of real supervisors (`runlog serve --store postgres://… --node <name>` processes, each with a home
// of its own as each host has) sharing one log on the real PostgreSQL server, with real apps (Docker and
// PRoot). Leases and fencing:
// - SIGSTOP a supervisor past its lease: a survivor takes its actors over and records them lost; after SIGCONT
//   the woken supervisor's appends for them are refused (fenced) and the log does not move;
// - kill -9 one of three during a burst of spawns: every acknowledged spawn is in the log, owned by a survivor
//   within the lease TTL plus a beat, and recorded lost; nothing is owned by the dead node.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { HELLO_APP_DIR, requireDocker, requireProot, until } from './support/apps.ts';
import { runCli, startServe, type Served } from './support/cli-process.ts';
import { cleanupTestContainers } from './support/docker.ts';
import { dropSchemas, requirePostgres, testSchema } from './support/postgres.ts';

const TTL = 2000;
const served: Served[] = [];
const roots: string[] = [];
const homes: string[] = [];
let url = '';
afterAll(async () => {
  for (const s of served) {
    if (s.child.exitCode === null && s.child.signalCode === null) {
      s.child.kill('SIGCONT');
      s.child.kill('SIGKILL');
    }
  }
  for (const h of homes) await cleanupTestContainers({ 'runlog.home': h });
  for (const r of roots) rmSync(r, { recursive: true, force: true });
  if (url) await dropSchemas(url);
});

interface Node {
  name: string;
  home: string;
  s: Served & { info: NonNullable<Served['info']> };
}

async function startNode(root: string, name: string, store: string): Promise<Node> {
  const home = join(root, name);
  mkdirSync(home, { recursive: true, mode: 0o700 });
  homes.push(home);
  const s = await startServe(home, '127.0.0.1:0', ['--store', store, '--node', name, '--lease-ttl', String(TTL)]);
  served.push(s);
  if (!s.info) throw new Error(`runlog serve --node ${name} did not start:\n${s.stderr()}`);
  return { name, home, s: s as Node['s'] };
}

async function sql<R>(schema: string, text: string, params: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`SET search_path TO ${schema}`);
    return (await c.query(text, params)).rows as R[];
  } finally {
    await c.end();
  }
}

const ps = (store: string): any[] => {
  const r = runCli(['ps', '--all', '--json', '--store', store]);
  if (r.code !== 0) throw new Error(`ps failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
};

describe('a cluster of supervisors on PostgreSQL', () => {
  it('SIGSTOP past the lease: a survivor takes over and records the instance lost; the woken supervisor is fenced and the log does not move', { timeout: 600_000 }, async () => {
    await requireDocker();
    url = await requirePostgres();
    const root = mkdtempSync(join(tmpdir(), 'runlog-cluster-'));
    roots.push(root);
    const schema = testSchema('fence');
    const store = `${url}?schema=${schema}`;
    const a = await startNode(root, 'a', store);
    const b = await startNode(root, 'b', store);
    const id = `fence-${process.pid}`;
    const spawned = runCli(['spawn', HELLO_APP_DIR, '--sandbox', 'container', '--id', id, '--json'], { home: a.home, timeoutMs: 240_000 });
    expect(spawned.code, spawned.stderr).toBe(0);
    expect(JSON.parse(spawned.stdout)).toMatchObject({ id, state: 'running' });
    expect(await sql(schema, 'SELECT node FROM leases WHERE stream = $1', [`instance-${id}`])).toEqual([{ node: 'a' }]);

    a.s.child.kill('SIGSTOP');
    const lost = await until('b records the instance lost', () => ps(store).find((r) => r.id === id && r.state === 'lost'), TTL * 10, 200);
    // b holds the lease now, or has given it back already (a lost instance has ended).
    expect((await sql<{ node: string }>(schema, 'SELECT node FROM leases WHERE stream = $1', [`instance-${id}`])).map((r) => r.node)).not.toContain('a');
    const events = runCli(['events', id, '--json', '--store', store]);
    const history = events.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(history.at(-1)).toMatchObject({ type: 'instance.lost', meta: { source: 'cluster' }, data: { evidence: { node: 'a', takenOverBy: 'b' } } });

    a.s.child.kill('SIGCONT');
    // The woken supervisor lets go of the instance (its lease renewal finds the lease taken) and records nothing
    // more about it: a stop through it sees the instance lost (stopping a stopped instance succeeds) and appends
    // nothing. (That an append with a lease that expired or was taken is refused in its transaction is shown
    // directly in store-pg-fencing.int.test.ts.)
    await until('a notices it lost the lease', () => a.s.stderr().includes('lost the lease'), TTL * 5, 100);
    const stop = runCli(['stop', id, '--json'], { home: a.home, timeoutMs: 120_000 });
    expect(stop.code, stop.stderr).toBe(0);
    expect(JSON.parse(stop.stdout)).toMatchObject({ id, state: 'lost' });
    const after = runCli(['events', id, '--json', '--store', store]);
    expect(after.stdout).toBe(events.stdout); // not one event more
    expect(lost.version).toBe(history.length);

    for (const n of [a, b]) n.s.child.kill('SIGTERM');
    for (const n of [a, b]) expect(await n.s.exit).toBe(0);
  });

  it('kill -9 one of three during a burst of spawns: every acknowledged spawn is in the log, owned by a survivor and recorded lost', { timeout: 600_000 }, async () => {
    requireProot();
    url = await requirePostgres();
    const root = mkdtempSync(join(tmpdir(), 'runlog-cluster-'));
    roots.push(root);
    const schema = testSchema('kill');
    const store = `${url}?schema=${schema}`;
    const [a, b, c] = [await startNode(root, 'a', store), await startNode(root, 'b', store), await startNode(root, 'c', store)];
    // A burst on a, some on b and c too; a dies while its last spawns are in flight.
    const acknowledged: { id: string; node: string }[] = [];
    const burst = (n: Node, k: number) =>
      Array.from({ length: k }, (_, i) => `${n.name}${i}-${process.pid}`).map(
        (id) =>
          new Promise<void>((resolve) => {
            const r = runCli(['spawn', HELLO_APP_DIR, '--sandbox', 'proot', '--id', id, '--json'], { home: n.home, timeoutMs: 120_000 });
            if (r.code === 0 && JSON.parse(r.stdout).state === 'running') acknowledged.push({ id, node: n.name });
            resolve();
          }),
      );
    await Promise.all([...burst(a, 3), ...burst(b, 1), ...burst(c, 1)]);
    expect(acknowledged.filter((x) => x.node === 'a').length).toBe(3);
    const killedAt = Date.now();
    a.s.child.kill('SIGKILL');
    await a.s.exit;
    const onA = acknowledged.filter((x) => x.node === 'a').map((x) => `instance-${x.id}`);
    await until('every lease of a owned by a survivor', async () => {
      // Only an owner gives a lease back (after recording its actor ended): a lease of a's that is gone was a survivor's.
      const rows = await sql<{ node: string }>(schema, 'SELECT node FROM leases WHERE stream = ANY($1)', [onA]);
      return rows.every((r) => r.node === 'b' || r.node === 'c');
    }, TTL * 10, 100);
    const tookMs = Date.now() - killedAt;
    // Owned again within the lease TTL plus a beat of the survivors (TTL/3) and some slack for a loaded machine.
    expect(tookMs).toBeLessThan(TTL + TTL / 3 + 3000);
    const rows = await until('a\'s instances recorded lost', () => {
      const all = ps(store);
      return onA.every((s) => all.find((r) => `instance-${r.id}` === s)?.state === 'lost') ? all : null;
    }, TTL * 10, 200);
    // Every acknowledged spawn is in the log; the survivors' own are running still, owned by themselves.
    for (const x of acknowledged) expect(rows.find((r) => r.id === x.id), x.id).toBeDefined();
    for (const x of acknowledged.filter((y) => y.node !== 'a')) expect(rows.find((r) => r.id === x.id).state).toBe('running');
    expect(await sql(schema, "SELECT count(*)::int AS n FROM leases WHERE node = 'a'")).toEqual([{ n: 0 }]);
    // The log is gapless and each lost instance has exactly one lost event.
    const all = runCli(['events', '--all', '--json', '--store', store]).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i + 1));
    for (const s of onA) expect(all.filter((e) => e.stream === s && e.type === 'instance.lost').length).toBe(1);
    for (const n of [b, c]) n.s.child.kill('SIGTERM');
    for (const n of [b, c]) expect(await n.s.exit).toBe(0);
  });
});
