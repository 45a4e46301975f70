// Persisted timers survive a takeover: real supervisors (`runlog serve --store postgres://… --node a|b`) on the
// real PostgreSQL server, a real container app. The instance crashes on a (its container killed through Docker)
// and waits in crashed.backoff for its restart; a is killed -9 before the restart is due. b takes the instance
// over, its restart comes due on b (`instance.restart-due`, b's) and it runs again, on b. Every log line of a
// node names it by its --node name.
import { afterAll, describe, expect, it } from 'vitest';
import { requireDockerAppBase, until } from '../../support/apps.ts';
import { helloApp } from '../../support/child-supervisor.ts';
import { cleanupClusters, createCluster } from '../../support/cluster-fixture.ts';
import { docker } from '../../support/docker.ts';

const TTL = 3000;
afterAll(cleanupClusters);

describe('a takeover of an instance waiting for its restart', () => {
  it(
    're-arms the restart timer on the survivor: restart-due fires there and the instance runs again',
    { timeout: 600_000 },
    async () => {
      await requireDockerAppBase();
      const cluster = await createCluster({ tag: 'timers', ttlMs: TTL });
      // The restart comes due a while after the crash: after a is killed, around when b takes the instance over.
      const app = helloApp(cluster.root, {
        sandbox: 'container',
        restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 5000, maxBackoffMs: 5000 },
      });
      const a = await cluster.startNode('a');
      const b = await cluster.startNode('b');
      const id = `timers-${process.pid}`;
      const spawned = await a.api('POST', '/api/instances', { appDir: app, instanceId: id });
      expect(spawned.status, JSON.stringify(spawned.body)).toBe(201);
      const containers = (node: string) =>
        docker.listContainers({
          filters: JSON.stringify({ label: [`runlog.stream=instance-${id}`, `runlog.node=${node}`] }),
        });
      const [onA] = await containers('a');
      expect(onA).toBeDefined();

      // The app dies on a: a records the crash and schedules its restart.
      await docker.getContainer(onA!.Id).kill();
      const scheduled = await until(
        'a schedules the restart',
        () => cluster.events(id).find((e) => e.type === 'instance.restart-scheduled') ?? null,
        60_000,
        100,
      );
      expect(scheduled.meta.node).toBe('a');
      await a.kill();
      const before = cluster.events(id);
      expect(before.at(-1)?.type).toBe('instance.restart-scheduled'); // a died before it came due

      const history = await until(
        'the instance runs again on b',
        () => {
          const h = cluster.events(id);
          return h.at(-1)?.type === 'instance.running' && h.length > before.length ? h : null;
        },
        120_000,
        300,
      ).catch((err: Error) => {
        throw new Error(
          `${err.message}\nevents: ${JSON.stringify(cluster.events(id).slice(before.length - 1))}\nb: ${b.stderr().slice(-3000)}`,
        );
      });
      const added = history.slice(before.length);
      expect(
        added.every((e) => e.meta.node === 'b'),
        JSON.stringify(added),
      ).toBe(true);
      const due = added.filter((e) => e.type === 'instance.restart-due');
      expect(due).toHaveLength(1);
      expect(due[0]!.data).toMatchObject({ dueAt: scheduled.data.dueAt });
      expect(added.filter((e) => e.type === 'instance.spawned')).toHaveLength(1);
      expect((await containers('b')).map((c) => c.State)).toEqual(['running']);
      expect(await cluster.sql('SELECT node FROM leases WHERE stream = $1', [`instance-${id}`])).toEqual([
        { node: 'b' },
      ]);

      // Every line of b's log names b (serve --node), not the host.
      const lines = b
        .stderr()
        .split('\n')
        .filter((l) => l.startsWith('{'));
      expect(lines.length).toBeGreaterThan(0);
      expect(new Set(lines.map((l) => JSON.parse(l).node))).toEqual(new Set(['b']));

      expect(await b.stop()).toBe(0);
    },
  );
});
