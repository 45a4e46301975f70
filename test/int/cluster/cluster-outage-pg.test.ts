// An outage of PostgreSQL shorter than the lease TTL changes no owner: two real supervisors (`runlog serve --store
// … --node a|b`) each with a live PRoot app, on a throwaway PostgreSQL server of this test's own
// (support/pg-cluster.ts). The server is stopped (-m fast) and started again, the whole outage just under the
// TTL, three times, each begun just before a node's renewal: its lease is then a beat (TTL/3) old, so its expiry
// passes while the server is down. Afterwards every lease has the node and the token it had, no node took anything
// over, and no node fenced itself: the outage is longer than the self-fence's fraction of the TTL, but the nodes'
// renewals found the server down (refused, starting up), and that time counts as safe (supervisor/cluster/self-fence.ts).
import { afterAll, describe, expect, it } from 'vitest';
import { HELLO_APP_DIR, requireProot } from '../../support/apps.ts';
import { cleanupClusters, createCluster } from '../../support/cluster-fixture.ts';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../../support/pg-cluster.ts';

const TTL = 6000;
const servers: ThrowawayPostgres[] = [];
afterAll(async () => {
  await cleanupClusters();
  for (const s of servers) s.destroy();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a PostgreSQL outage shorter than the lease TTL', () => {
  it(
    'stopping the server for just under the TTL, three times, each just before a renewal, moves no lease and stops no instance',
    { timeout: 400_000 },
    async () => {
      requireProot();
      const server = startThrowawayPostgres();
      servers.push(server);
      const cluster = await createCluster({ tag: 'outage', ttlMs: TTL, url: server.url });
      const a = await cluster.startNode('a', ['--ports', '5100-5199']);
      const b = await cluster.startNode('b', ['--ports', '5200-5299']);
      const c = await cluster.startNode('c', ['--ports', '5300-5399']);
      const ids = [`oa-${process.pid}`, `ob-${process.pid}`, `oc-${process.pid}`];
      for (const [n, id] of [
        [a, ids[0]!],
        [b, ids[1]!],
        [c, ids[2]!],
      ] as const) {
        const r = cluster.cli(['spawn', HELLO_APP_DIR, '--sandbox', 'proot', '--id', id, '--json'], n, 180_000);
        expect(r.code, r.stderr).toBe(0);
      }
      type Lease = { stream: string; node: string; token: number };
      const leases = () =>
        cluster.sql<Lease>('SELECT stream, node, token::float8 AS token FROM leases ORDER BY stream');
      const before = await leases();
      expect(before.map((l) => l.node)).toEqual(['a', 'b', 'c']);

      // How long a start takes here, so that each outage ends just under the TTL.
      server.stop('fast');
      let t = Date.now();
      await server.startAsync();
      let startMs = Date.now() - t;
      await sleep(2 * TTL); // renewed again since
      for (let round = 0; round < 3; round++) {
        // Just before the renewal of the lease of node a, b or c in turn (it comes every TTL/3).
        const stream = before[round]!.stream;
        for (;;) {
          const [left] = await cluster.sql<{ ms: number }>(
            'SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS ms FROM leases WHERE stream = $1',
            [stream],
          );
          if (left!.ms < (2 * TTL) / 3 + 40) break;
          await sleep(10);
        }
        t = Date.now();
        server.stop('fast');
        await sleep(Math.max(0, TTL - 600 - Math.round(startMs * 1.3) - (Date.now() - t)));
        const s0 = Date.now();
        await server.startAsync();
        startMs = Date.now() - s0;
        const outage = Date.now() - t;
        expect(outage, 'the outage must be shorter than the TTL (the machine was too slow to stage it)').toBeLessThan(
          TTL,
        );
        // A lease a beat (TTL/3) old when it began expired during it.
        expect(outage).toBeGreaterThan((2 * TTL) / 3);
        // Long enough for any takeover: the leases' expiry, a full TTL after the server's start, and a beat more.
        await sleep(2 * TTL);
        expect(await leases(), `round ${round + 1}: outage ${outage} ms`).toEqual(before);
      }
      for (const n of [a, b, c]) {
        expect(n.alive()).toBe(true);
        expect(n.stderr()).not.toMatch(/took over \d+ lease|lost the lease/);
        expect(n.stderr()).not.toContain('self-fence: no lease renewal answered');
      }
      // Nothing was stopped: every instance ran on throughout.
      for (const id of ids) expect(cluster.events(id).map((e) => e.type)).not.toContain('instance.crashed');
    },
  );
});
