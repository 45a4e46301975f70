// A node that comes back after kill -9 while its instance was restarted elsewhere: two real supervisors
// (`runlog serve --store postgres://… --node a|b`, their own homes, one Docker daemon) on a schema of their own on
// the real PostgreSQL server, and a real container app on a. a is killed with SIGKILL: its container keeps
// running (Docker does not care), b takes the lease over and restarts the instance in a container of its own.
// Then a starts again with the same name and home. It must not fight the new owner: its reconciler removes its
// stale container of the instance, nothing it does lands in the instance's history, the lease stays b's, and the
// instance keeps running on b (the same container).
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { HELLO_APP_DIR, requireDockerAppBase, until } from './support/apps.ts';
import { runCli, startServe, type Served } from './support/cli-process.ts';
import { cleanupTestContainers, docker } from './support/docker.ts';
import { dropSchemas, requirePostgres, testSchema } from './support/postgres.ts';

const TTL = 5000;
const served: Served[] = [];
const roots: string[] = [];
const homes: string[] = [];
let url = '';
afterAll(async () => {
  for (const s of served) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  for (const h of homes) await cleanupTestContainers({ 'runlog.home': h });
  for (const r of roots) rmSync(r, { recursive: true, force: true });
  if (url) await dropSchemas(url);
});

async function serveNode(root: string, name: string, store: string): Promise<{ name: string; home: string; s: Served }> {
  const home = join(root, name);
  mkdirSync(home, { recursive: true, mode: 0o700 });
  if (!homes.includes(home)) homes.push(home);
  const s = await startServe(home, '127.0.0.1:0', ['--store', store, '--node', name, '--lease-ttl', String(TTL)]);
  served.push(s);
  if (!s.info) throw new Error(`runlog serve --node ${name} did not start:\n${s.stderr()}`);
  return { name, home, s };
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

describe('a node that comes back after kill -9', () => {
  it('finds its instance restarted on another node: its reconciler removes its stale container, appends nothing, and the instance keeps running there', { timeout: 600_000 }, async () => {
    await requireDockerAppBase();
    url = await requirePostgres();
    const root = mkdtempSync(join(tmpdir(), 'runlog-rejoin-'));
    roots.push(root);
    const schema = testSchema('rejoin');
    const store = `${url}?schema=${schema}`;
    let a = await serveNode(root, 'a', store);
    const b = await serveNode(root, 'b', store);
    const id = `rejoin-${process.pid}`;
    const spawned = runCli(['spawn', HELLO_APP_DIR, '--sandbox', 'container', '--id', id, '--json'], { home: a.home, timeoutMs: 240_000 });
    expect(spawned.code, spawned.stderr).toBe(0);
    const containers = (node: string) => docker.listContainers({ all: true, filters: JSON.stringify({ label: [`runlog.stream=instance-${id}`, `runlog.node=${node}`] }) });
    const onA = await containers('a');
    expect(onA.map((c) => c.State)).toEqual(['running']);
    const history = (): any[] => runCli(['events', id, '--json', '--store', store]).stdout.trim().split('\n').map((l) => JSON.parse(l));

    // kill -9 of a: its container runs on; b takes the instance over and runs it in a container of its own.
    a.s.child.kill('SIGKILL');
    await a.s.exit;
    const taken = await until('b runs the instance', async () => {
      const h = history();
      const mine = await containers('b');
      return h.at(-1)?.type === 'instance.running' && h.some((e) => e.type === 'instance.crashed') && mine.some((c) => c.State === 'running') ? { h, mine } : null;
    }, 120_000, 300).catch((err: Error) => {
      throw new Error(`${err.message}\nevents: ${JSON.stringify(history().slice(-5))}\nb: ${b.s.stderr().slice(-3000)}`);
    });
    expect((await containers('a')).map((c) => c.Id)).toEqual(onA.map((c) => c.Id)); // a's is still there (its node is gone)
    const lease = await sql<{ node: string; token: string }>(schema, 'SELECT node, token FROM leases WHERE stream = $1', [`instance-${id}`]);
    expect(lease.map((l) => l.node)).toEqual(['b']);
    const bContainer = taken.mine.find((c) => c.State === 'running')!.Id;

    // a comes back (same name, same home): it has reconciled its host when it answers.
    a = await serveNode(root, 'a', store);
    await until("a's stale container of the instance is removed", async () => (await containers('a')).length === 0, 60_000, 200).catch((err: Error) => {
      throw new Error(`${err.message}\na: ${a.s.stderr().slice(-3000)}`);
    });
    // Nothing of a's landed: the history is what b left, the lease is b's with the same token, the instance runs
    // on b in the same container.
    await new Promise((r) => setTimeout(r, TTL)); // a full lease period with both nodes up
    expect(history()).toEqual(taken.h);
    expect(await sql(schema, 'SELECT node, token FROM leases WHERE stream = $1', [`instance-${id}`])).toEqual(lease);
    expect((await containers('b')).filter((c) => c.State === 'running').map((c) => c.Id)).toEqual([bContainer]);
    expect(await containers('a')).toHaveLength(0);
    const row = JSON.parse(runCli(['ps', '--json', '--store', store]).stdout).find((r: any) => r.id === id);
    expect(row).toMatchObject({ state: 'running', node: 'b', owner: 'b' });
    expect(a.s.stderr()).not.toContain('FENCED');
    // A stop through a is refused (a does not own it) and changes nothing; through b it works.
    const stopA = runCli(['stop', id, '--json'], { home: a.home, timeoutMs: 120_000 });
    expect(stopA.code).not.toBe(0);
    expect(history()).toEqual(taken.h);
    const stopB = runCli(['stop', id, '--json'], { home: b.home, timeoutMs: 120_000 });
    expect(stopB.code, stopB.stderr).toBe(0);
    expect(JSON.parse(stopB.stdout)).toMatchObject({ id, state: 'stopped' });

    for (const n of [a, b]) n.s.child.kill('SIGTERM');
    for (const n of [a, b]) expect(await n.s.exit).toBe(0);
  });
});
