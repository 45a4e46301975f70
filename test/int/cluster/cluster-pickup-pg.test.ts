// A new actor's first event commits with its lease (one transaction) but the reply to its supervisor is lost (the
// connection cut right after COMMIT, PostgreSQL restarting): the caller hears STORE_UNAVAILABLE, the node never
// learns the lease's token, and no actor is in its host — yet the lease names the node. The node picks it up:
// it adopts the lease (same token) and rehydrates the actor from the log exactly as start-up does. The lost reply
// is made directly: the test commits what node a's append commits (its claim: lease + instance.requested, through
// the store's API) as if a had sent it, and a is never told. A real supervisor (`runlog serve --node a`), real
// PostgreSQL, a real PRoot app.
import { afterAll, describe, expect, it } from 'vitest';
import { actorsProjection } from '../../../src/supervisor/host/actors-projection.ts';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { splitStoreUrl } from '../../../src/store/postgres/host-store.ts';
import { alive, HELLO_APP_DIR, requireProot, until } from '../../support/apps.ts';
import { cleanupClusters, createCluster } from '../../support/cluster-fixture.ts';

const TTL = 3000;
afterAll(cleanupClusters);

describe('a cluster node picks up what it owns but does not run', () => {
  it(
    'a spawn whose first event and lease committed while its reply was lost is picked up by its node and runs (once)',
    { timeout: 300_000 },
    async () => {
      requireProot();
      const cluster = await createCluster({ tag: 'pickup', ttlMs: TTL });
      const a = await cluster.startNode('a');
      // A spawn through a, to have a spec as a writes it.
      const seed = `seed-${process.pid}`;
      const spawned = cluster.cli(['spawn', HELLO_APP_DIR, '--sandbox', 'proot', '--id', seed, '--json'], a);
      expect(spawned.code, spawned.stderr).toBe(0);
      const first = cluster.events(seed)[0]!;
      expect(first.type).toBe('instance.requested');

      // What a's claim of a new instance commits: its lease for a and its first event, in one transaction.
      const id = `orphan-${process.pid}`;
      const stream = `instance-${id}`;
      const { url, schema } = splitStoreUrl(cluster.store);
      const pg = await PgEventStore.open({ url, schema: schema!, projections: [actorsProjection()] });
      try {
        const claimed = new Map<string, number>();
        const data = first.data as { spec: Record<string, unknown> };
        const [o] = await pg.appendMany(
          [
            {
              stream,
              events: [
                { type: 'instance.requested', data: { spec: { ...data.spec, instanceId: id } }, meta: { node: 'a' } },
              ],
              expectedVersion: 'no-stream',
            },
          ],
          { fence: { node: 'a', tokens: new Map(), claim: { streams: new Set([stream]), ttlMs: TTL, claimed } } },
        );
        expect(o!.ok).toBe(true);
        expect(claimed.has(stream)).toBe(true);
        const token = claimed.get(stream)!;

        // a finds the lease it holds without running its actor, and runs it: within a few beats and a spawn.
        const history = await until(
          'a picks the instance up and runs it',
          () => {
            const h = cluster.events(id);
            return h.at(-1)?.type === 'instance.running' ? h : null;
          },
          90_000,
          300,
        ).catch((err: Error) => {
          throw new Error(
            `${err.message}\nevents: ${JSON.stringify(cluster.events(id))}\na: ${a.stderr().slice(-3000)}`,
          );
        });
        expect(a.stderr()).toContain('picked up 1 actor(s)');
        // Recovered as start-up recovers an interrupted spawn (its PRoot child is not there: crashed, restarted per
        // its policy), once: one spawn, by a, and it is alive.
        const spawns = history.filter((e) => e.type === 'instance.spawned');
        expect(spawns).toHaveLength(1);
        expect(history.every((e) => (e.meta as { node?: string }).node === 'a')).toBe(true);
        expect(alive((spawns[0]!.data as { pid: number }).pid)).toBe(true);
        // The lease is a's with the token its claim took (adopted, not taken anew), and live.
        expect(
          await cluster.sql(
            'SELECT node, token::integer AS token, expires_at > clock_timestamp() AS live FROM leases WHERE stream = $1',
            [stream],
          ),
        ).toEqual([{ node: 'a', token, live: true }]);
        expect(cluster.ps().find((r) => r.id === id)).toMatchObject({ state: 'running', owner: 'a' });
        // And a acts on it as on any of its own: a stop through a is taken.
        const stop = cluster.cli(['stop', id, '--json'], a);
        expect(stop.code, stop.stdout + stop.stderr).toBe(0);
        await until(
          'the instance stops',
          () => cluster.ps().find((r) => r.id === id)?.state === 'stopped',
          30_000,
          300,
        );
      } finally {
        await pg.close();
      }
      expect(await a.stop()).toBe(0);
    },
  );
});
