// Placement in a cluster of real supervisors (`runlog serve --store postgres://… --node <name>` processes, each
// with a home of its own) sharing one log on the real PostgreSQL server (a schema of its own per test):
// - a spawn with node 'b' taken by a's API runs on b (handed over through the log: b records it and holds its
//   lease); 'any' picks the live node with the fewest live instances; a node that is unknown or not live is a
//   typed error and nothing is spawned;
// - racing claims: three nodes with an execution limit of 2 each and many executions queued at once: each is
//   started exactly once, by one node, and no node ever runs more than its limit — all read from the log.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { publishCode } from '../../../src/supervisor/executions/publishing.ts';
import { alive, HELLO_APP_DIR, requireDockerAppBase, requireProot, until } from '../../support/apps.ts';
import { cleanupClusters, createCluster, type ClusterNode } from '../../support/cluster-fixture.ts';
import { requireRegistry } from '../../support/docker.ts';
import { publishNodeRuntime, startTestPds, type TestPds } from '../../support/pds.ts';

// Long enough that a supervisor on this loaded shared machine keeps its leases while alive.
const TTL = 5000;
let pds: TestPds | undefined;
afterAll(async () => {
  await cleanupClusters();
  await pds?.close();
});

describe('placement in a cluster on PostgreSQL', () => {
  it(
    "spawn with node 'b' through a's API runs on b; 'any' picks the least loaded live node; an unknown or stopped node is a typed error",
    { timeout: 600_000 },
    async () => {
      requireProot();
      const cluster = await createCluster({ tag: 'place', ttlMs: TTL });
      const { root } = cluster;
      const allEvents = (): any[] => cluster.allEvents();
      const [a, b, c] = [await cluster.startNode('a'), await cluster.startNode('b'), await cluster.startNode('c')];
      const spawn = (via: ClusterNode, id: string, node?: string) =>
        cluster.cli(
          ['spawn', HELLO_APP_DIR, '--sandbox', 'proot', '--id', id, '--json', ...(node ? ['--node', node] : [])],
          via,
          180_000,
        );
      const leaseOf = async (id: string) =>
        (await cluster.sql<{ node: string }>('SELECT node FROM leases WHERE stream = $1', [`instance-${id}`])).map(
          (r) => r.node,
        );

      // 1. Named: a's API, b runs it.
      const onB = `onb-${process.pid}`;
      const r1 = spawn(a, onB, 'b');
      expect(r1.code, r1.stdout + r1.stderr).toBe(0);
      const view = JSON.parse(r1.stdout);
      expect(view).toMatchObject({ id: onB, state: 'running' });
      expect(alive(view.context.pid)).toBe(true);
      expect(await leaseOf(onB)).toEqual(['b']);
      let log = allEvents();
      const requested = log.filter((e) => e.stream === 'placement-b' && e.type === 'placement.spawn-requested');
      expect(requested).toHaveLength(1);
      expect(requested[0]).toMatchObject({ data: { instanceId: onB, from: 'a' }, meta: { node: 'a' } });
      const history = log.filter((e) => e.stream === `instance-${onB}`);
      // Every event of the instance was appended by b, its first after the request.
      expect(history.map((e) => e.meta.node)).toEqual(history.map(() => 'b'));
      expect(history[0]).toMatchObject({ type: 'instance.requested' });
      expect(history[0].seq).toBeGreaterThan(requested[0].seq);
      expect(b.stderr()).toContain(`spawned ${onB} placed here by a`);

      // 2. any: a 1 (spawned locally), b 1, c 0 → c; then all equal → the node that took the call (a).
      const onA = `ona-${process.pid}`;
      expect(spawn(a, onA).code).toBe(0);
      expect(await leaseOf(onA)).toEqual(['a']);
      const any1 = `any1-${process.pid}`;
      const r2 = spawn(a, any1, 'any');
      expect(r2.code, r2.stdout + r2.stderr).toBe(0);
      expect(await leaseOf(any1)).toEqual(['c']);
      const any2 = `any2-${process.pid}`;
      const r3 = spawn(a, any2, 'any');
      expect(r3.code, r3.stdout + r3.stderr).toBe(0);
      expect(await leaseOf(any2)).toEqual(['a']);
      // And through b's API with b now the only one with fewer: a 2, b 1, c 1 → b (itself) on the tie with c.
      const any3 = `any3-${process.pid}`;
      expect(spawn(b, any3, 'any').code).toBe(0);
      expect(await leaseOf(any3)).toEqual(['b']);

      // 3. Unknown, malformed and stopped nodes: typed errors, nothing spawned.
      const unknown = spawn(a, `zz-${process.pid}`, 'zz');
      expect(unknown.code).not.toBe(0);
      expect(unknown.stdout + unknown.stderr).toContain('NODE_UNKNOWN');
      expect(await c.stop()).toBe(0);
      const stopped = spawn(a, `onc-${process.pid}`, 'c');
      expect(stopped.code).not.toBe(0);
      expect(stopped.stdout + stopped.stderr).toContain('NODE_UNAVAILABLE');
      const refusedIds = [`zz-${process.pid}`, `onc-${process.pid}`];
      expect(
        allEvents().filter((e) => refusedIds.some((id) => e.stream === `instance-${id}` || e.data?.instanceId === id)),
      ).toEqual([]);
      const bad = await a.api('POST', '/api/instances', { appDir: HELLO_APP_DIR, node: 'no such node!' });
      expect(bad.status).toBe(400);

      // 4. A node refuses what it cannot spawn (no such app directory on its host): the caller gets its typed error.
      const missing = cluster.cli(
        ['spawn', join(root, 'not-there'), '--id', `miss-${process.pid}`, '--node', 'b', '--json'],
        a,
      );
      expect(missing.code).not.toBe(0);
      expect(missing.stdout + missing.stderr).toContain('APP_DIR_MISSING');
      log = allEvents();
      expect(log.filter((e) => e.stream === 'placement-b' && e.type === 'placement.spawn-refused')).toEqual([
        expect.objectContaining({
          data: expect.objectContaining({ instanceId: `miss-${process.pid}`, code: 'APP_DIR_MISSING' }),
        }),
      ]);
      expect(log.some((e) => e.stream === `instance-miss-${process.pid}`)).toBe(false);

      for (const code of await Promise.all([a, b].map((n) => n.stop()))) expect(code).toBe(0);
    },
  );

  it(
    'racing claims: many executions queued at once on three nodes with a limit of 2 each: each starts exactly once, no node over its limit',
    { timeout: 600_000 },
    async () => {
      await requireDockerAppBase();
      await requireRegistry();
      const cluster = await createCluster({ tag: 'claims', ttlMs: TTL });
      const { root } = cluster;
      const allEvents = (): any[] => cluster.allEvents();
      pds = await startTestPds();
      const runtime = await publishNodeRuntime(pds, `placert-${process.pid}.test`);
      const author = await pds.createAccount(`place-${process.pid}.test`);
      const codeDir = mkdtempSync(join(root, 'code-'));
      writeFileSync(
        join(codeDir, 'index.mjs'),
        'export async function nap(input) { await new Promise((r) => setTimeout(r, input.ms)); return { n: input.n }; }\n',
      );
      const uri = (
        await publishCode(author.publisher, {
          dir: codeDir,
          runtime,
          entrypoint: 'index.mjs',
          atproto: { plcUrl: pds.plcUrl },
        })
      ).uri;
      const LIMIT = 2;
      const N = 12;
      const flags = ['--plc', pds.plcUrl, '--exec-limit', String(LIMIT)];
      const nodes = [
        await cluster.startNode('a', flags),
        await cluster.startNode('b', flags),
        await cluster.startNode('c', flags),
      ];
      // One first, pinned to b, alone: nodes on one machine share its Docker daemon, and two of them materializing the
      // same code volume at the same moment trip over each other's unsealed volume (README, Not done yet) — not what
      // this test is about. Sealed once, every node finds it cached.
      const first = await nodes[0]!.api('POST', '/api/executions', {
        uri,
        handler: 'nap',
        input: { ms: 10, n: -1 },
        timeoutMs: 60_000,
        node: 'b',
      });
      expect(first, JSON.stringify(first.body)).toMatchObject({
        status: 200,
        body: { status: 'succeeded', output: { n: -1 } },
      });
      expect(allEvents().find((e) => e.stream === `execution-${first.body.executionId}`)).toMatchObject({
        type: 'execution.requested',
        meta: { node: 'b' },
      });
      // Then all queued at once, through all three APIs, for any node.
      const calls = Array.from({ length: N }, (_, n) =>
        nodes[n % 3]!.api('POST', '/api/executions', {
          uri,
          handler: 'nap',
          input: { ms: 1500, n },
          timeoutMs: 60_000,
          node: 'any',
        }),
      );
      const answers = await Promise.all(calls);
      for (const [n, r] of answers.entries())
        expect(r, JSON.stringify(r.body)).toMatchObject({ status: 200, body: { status: 'succeeded', output: { n } } });

      // From the log: every queued execution has one stream, one execution.requested (the claim) and one start,
      // all appended by the node that claimed it; at no position does a node have more than LIMIT unended.
      const log = allEvents();
      const queued = log.filter((e) => e.stream === 'queue-executions' && e.type === 'execution.queued');
      expect(queued).toHaveLength(N + 1);
      const ids = queued.map((e) => e.data.executionId);
      expect(new Set(ids).size).toBe(N + 1);
      const claimedBy = new Map<string, string>();
      for (const id of ids) {
        const h = log.filter((e) => e.stream === `execution-${id}`);
        expect(
          h.filter((e) => e.type === 'execution.requested'),
          id,
        ).toHaveLength(1);
        expect(
          h.filter((e) => e.type === 'execution.started'),
          id,
        ).toHaveLength(1);
        expect(
          h.filter((e) => e.type === 'execution.succeeded'),
          id,
        ).toHaveLength(1);
        expect(new Set(h.map((e) => e.meta.node)).size, id).toBe(1);
        claimedBy.set(`execution-${id}`, h[0].meta.node);
      }
      const running = new Map<string, number>();
      let most = 0;
      for (const e of log) {
        const node = claimedBy.get(e.stream);
        if (!node) continue;
        if (e.type === 'execution.requested') running.set(node, (running.get(node) ?? 0) + 1);
        if (e.type === 'execution.succeeded' || e.type === 'execution.failed')
          running.set(node, running.get(node)! - 1);
        most = Math.max(most, running.get(node)!);
      }
      expect(most).toBeLessThanOrEqual(LIMIT);
      // N executions at LIMIT per node cannot all run on one node at once: more than one node claimed.
      expect(new Set(claimedBy.values()).size).toBeGreaterThan(1);
      // No lease of an ended execution is left behind (given back at the next beat).
      await until(
        "the executions' leases are given back",
        async () =>
          (
            await cluster.sql<{ n: number }>("SELECT count(*)::int AS n FROM leases WHERE stream LIKE 'execution-%'")
          )[0]!.n === 0,
        TTL * 3,
        200,
      );

      const codes = await Promise.all(nodes.map((n) => n.stop()));
      for (const [i, n] of nodes.entries()) expect(codes[i], `${n.name}: ${n.stderr().slice(-3000)}`).toBe(0);
    },
  );
});
