// Answers that match the log, in a cluster of real supervisors (`runlog serve --store postgres://… --node <name>`
// processes) sharing one log on the real PostgreSQL server, with real PRoot apps:
// - a spawn asked of node a, which is SIGSTOPped mid-spawn past its lease: a survivor takes the instance over,
//   records its node lost and restarts it, and it runs. The caller of a (answered by a once it wakes) and the
//   caller of c (the spawn placed on a through the log) are both answered `running`, as the log says — not
//   TIMEOUT "(state running)" nor SPAWN_FAILED "its node a is gone";
// - an execution's effect whose result was refused as FENCED (its lease ran out on the server's clock) reports
//   nothing more, not even its failure, even once its node has picked the lease up again: the failure "x no longer
//   owns …" is never appended (a supervisor on the real PostgreSQL server, in this process);
// - an execution pinned to a node that was just killed (its heartbeat still fresh, so the call is queued for it)
//   is answered NODE_UNAVAILABLE once the node is seen dead, and is withdrawn: the node, back later, never runs
//   it. A caller that asked to wait for the node waits up to its deadline (then NODE_UNAVAILABLE), and one whose
//   node comes back within it has the execution run there.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import type { PgHostStore } from '../../../src/store/postgres/host-store.ts';
import { collect } from '../../../src/store/port.ts';
import { requireProot, until } from '../../support/apps.ts';
import { helloApp } from '../../support/child-supervisor.ts';
import { cleanupClusters, createCluster } from '../../support/cluster-fixture.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

// Long enough that a supervisor on this loaded shared machine keeps its leases while alive.
const TTL = 5000;
const roots: string[] = [];
afterAll(async () => {
  await cleanupClusters();
  await dropSchemas(await requirePostgres());
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

describe('answers that match the log', () => {
  it(
    'a spawn whose node is paused mid-spawn and whose instance a survivor restarts is answered running, by that node and through placement',
    { timeout: 600_000 },
    async () => {
      requireProot();
      const cluster = await createCluster({ tag: 'answers', ttlMs: TTL });
      // hello-app that takes a few seconds to listen: its spawn is in flight long enough to pause its node in it.
      const app = helloApp(cluster.root, { appId: 'com.example.slow' });
      writeFileSync(
        join(app, 'start.mjs'),
        "await new Promise((r) => setTimeout(r, 8000));\nawait import('./server.mjs');\n",
      );
      writeFileSync(join(app, 'entrypoint.sh'), '#!/bin/bash\nexec node start.mjs\n', { mode: 0o755 });
      // Each node hands its PRoot instances ports of its own: a's copies (its sandboxes live on while it is paused)
      // never squat the ports the survivor gives the restarted instances.
      const [a, b, c] = [
        await cluster.startNode('a', ['--ports', '5400-5449']),
        await cluster.startNode('b', ['--ports', '5450-5499']),
        await cluster.startNode('c', ['--ports', '5500-5549']),
      ];
      const direct = `direct-${process.pid}`;
      const placed = `placed-${process.pid}`;
      // Asked of a (a answers), and asked of c to run on a (c answers, following the log).
      const failed = (err: Error) => ({ status: 0, body: { error: { code: 'NO_ANSWER', message: err.message } } });
      const askedA = a
        .api('POST', '/api/instances', { appDir: app, sandbox: 'proot', instanceId: direct })
        .catch(failed);
      const askedC = c
        .api('POST', '/api/instances', { appDir: app, sandbox: 'proot', instanceId: placed, node: 'a' })
        .catch(failed);
      const leaseOf = async (id: string) =>
        (await cluster.sql<{ node: string }>('SELECT node FROM leases WHERE stream = $1', [`instance-${id}`])).map(
          (r) => r.node,
        );
      await until(
        'both spawns are under way on a',
        async () => {
          const states = cluster
            .ps()
            .filter((r: any) => r.id === direct || r.id === placed)
            .map((r: any) => r.state);
          return (
            states.length === 2 &&
            states.every((s: string) => s === 'spawning') &&
            (await leaseOf(direct))[0] === 'a' &&
            (await leaseOf(placed))[0] === 'a'
          );
        },
        60_000,
        100,
      );

      a.signal('SIGSTOP');
      const restarted = (id: string) => {
        const h: any[] = cluster.events(id);
        const crash = h.findIndex((e) => e.type === 'instance.crashed' && e.data.reason === 'node-lost');
        return crash >= 0 && h.at(-1)?.type === 'instance.running' && h[crash].meta.node !== 'a';
      };
      await until(
        'a survivor records both lost with their node and runs them again',
        () => restarted(direct) && restarted(placed),
        120_000,
        300,
      ).catch((err: Error) => {
        throw new Error(
          `${err.message}\n${direct}: ${JSON.stringify(cluster.events(direct))}\n` +
            `${placed}: ${JSON.stringify(cluster.events(placed))}\n` +
            `b: ${b.stderr().slice(-2000)}\nc: ${c.stderr().slice(-2000)}`,
        );
      });
      a.signal('SIGCONT');

      const [ra, rc] = await Promise.all([askedA, askedC]);
      // Each answer is what the log says: running, on the survivor that restarted it.
      const said = (r: { status: number; body: any }) => [
        r.status,
        r.body?.state ?? r.body?.error?.code,
        r.body?.error?.message ?? null,
      ];
      expect([said(ra), said(rc)]).toEqual([
        [201, 'running', null],
        [201, 'running', null],
      ]);
      for (const [r, id] of [
        [ra, direct],
        [rc, placed],
      ] as const) {
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        expect(r.body).toMatchObject({ id, state: 'running' });
        const row = cluster.ps().find((x: any) => x.id === id);
        expect(row).toMatchObject({ state: 'running' });
        expect(['b', 'c']).toContain(row.owner);
      }
      for (const code of await Promise.all([a, b, c].map((n) => n.stop()))) expect(code).toBe(0);
    },
  );

  it(
    'an effect whose result was refused as FENCED appends nothing more, not even its failure, once its node has the lease again',
    { timeout: 120_000 },
    async () => {
      const url = await requirePostgres();
      const home = mkdtempSync(join(tmpdir(), 'runlog-fencedfx-'));
      roots.push(home);
      let executionId = '';
      let refused: unknown = null;
      let reported = false;
      // Long: no renewal comes between the lease running out and the refused append.
      const rl = await createRunlog({
        home,
        store: `${url}?schema=${testSchema('fencedfx')}`,
        node: 'x',
        leaseTtlMs: 60_000,
        collectGraceMs: 600_000,
        reconcile: false,
        watchApps: false,
        engineWatch: false,
        metrics: false,
        log: () => undefined,
        effects: {
          execution: {
            async resolve(_p, ctx) {
              executionId = ctx.actor.id;
              const stream = ctx.actor.stream;
              const pg = runlogInternals(rl).store as unknown as PgHostStore;
              await ctx.dispatch({ type: 'execution.step', data: { name: 'before', detail: {} } });
              // The lease runs out on the server's clock with no node to take it over (its node paused past it).
              await pg.pg.sql(
                "UPDATE leases SET expires_at = clock_timestamp() - interval '1 second' WHERE stream = $1",
                [stream],
              );
              try {
                await ctx.dispatch({ type: 'execution.step', data: { name: 'after', detail: {} } });
              } catch (err) {
                refused = err;
              }
              // The lease still names this node with its token: the node picks it up again at its next beat.
              const leasing = pg.leasing;
              if (!leasing) throw new Error('a node opened with a name has leases');
              leasing.pickUpSoon();
              await leasing.beat();
              await until('x holds the execution again', () => runlogInternals(rl).host.holds(stream), 10_000, 20);
              reported = true;
              // As the real effects do: a failure reported after a refused result.
              throw refused;
            },
          },
        },
      });
      try {
        const outcome = rl.execute({
          uri: 'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/dev.mainasara.at-run.beta.v2.code/x',
          handler: 'h',
        });
        outcome.catch(() => undefined);
        await until('the effect reported its failure', () => reported, 60_000, 20);
        await runlogInternals(rl).host.settled('execution', executionId);
        expect(refused).toMatchObject({ code: 'FENCED' });
        const appended = await collect(runlogInternals(rl).store.readStream(`execution-${executionId}`));
        expect(
          appended.filter((e) => e.type === 'execution.failed' || (e.data as { code?: unknown }).code === 'FENCED'),
          JSON.stringify(appended),
        ).toEqual([]);
        // The node that owns it again decides from the log: here it is cancelled, and that is the outcome.
        await rl.send('execution', executionId, { type: 'execution.cancel-requested', data: {} });
        await expect(outcome).resolves.toMatchObject({ status: 'failed', failure: { code: 'CANCELLED' } });
      } finally {
        await rl.close();
      }
    },
  );

  it(
    'an execution pinned to a dead node is answered NODE_UNAVAILABLE and never runs; ' +
      'asked to wait, it waits for the node up to its deadline',
    { timeout: 600_000 },
    async () => {
      const cluster = await createCluster({ tag: 'pinned', ttlMs: TTL });
      // A PLC directory nobody answers at: an execution's resolution fails at once, so who claimed it is all there is to see.
      const flags = ['--plc', 'http://127.0.0.1:9'];
      const a = await cluster.startNode('a', flags);
      let b = await cluster.startNode('b', flags);
      const uri = 'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/dev.mainasara.at-run.beta.v2.code/x';
      const exec = (extra: Record<string, unknown>) =>
        Promise.race([
          a.api('POST', '/api/executions', { uri, handler: 'h', node: 'b', ...extra }),
          new Promise<{ status: number; body: any }>((r) =>
            setTimeout(() => r({ status: 0, body: 'no answer within 90 s' }), 90_000),
          ),
        ]);
      await b.kill();
      // 1. b's heartbeat is still fresh: the call is queued for b, and answered once b is seen dead.
      const r1 = await exec({});
      expect([r1.status, r1.body?.error?.code], JSON.stringify(r1.body)).toEqual([503, 'NODE_UNAVAILABLE']);
      // 2. Asked to wait 5 s for b, which stays dead: NODE_UNAVAILABLE once the wait is over.
      const r2 = await exec({ nodeWaitMs: 5000 });
      expect([r2.status, r2.body?.error?.code], JSON.stringify(r2.body)).toEqual([503, 'NODE_UNAVAILABLE']);
      expect(r2.body.error.message).toContain('waited 5000 ms');
      const withdrawn = [r1, r2].map((r) => r.body.error.details.executionId as string);
      const queue = cluster.allEvents().filter((e: any) => e.stream === 'queue-executions');
      for (const id of withdrawn)
        expect(
          queue.filter((e: any) => e.type === 'execution.withdrawn' && e.data.executionId === id),
          id,
        ).toHaveLength(1);
      // 3. Asked to wait long enough, and b comes back meanwhile: b claims it and runs it (its resolution fails here).
      const r3p = exec({ nodeWaitMs: 120_000 });
      b = await cluster.startNode('b', flags);
      const r3 = await r3p;
      expect([r3.status, r3.body?.status], JSON.stringify(r3.body)).toEqual([200, 'failed']);
      expect(cluster.events(r3.body.executionId)[0]).toMatchObject({
        type: 'execution.requested',
        meta: { node: 'b' },
      });
      // b read the queue as it started (it claimed the third): the withdrawn ones never ran, on any node.
      for (const id of withdrawn) expect(cluster.events(id), id).toEqual([]);
      for (const code of await Promise.all([a, b].map((n) => n.stop()))) expect(code).toBe(0);
    },
  );
});
