// A node that comes back after kill -9 while its instance was restarted elsewhere: two real supervisors
// (`runlog serve --store postgres://… --node a|b`, their own homes, one Docker daemon) on a schema of their own on
// the real PostgreSQL server, and a real container app on a. a is killed with SIGKILL: its container keeps
// running (Docker does not care) until b takes the lease over: b, on the same Docker daemon, removes it and restarts
// the instance in a container of its own. Then a starts again with the same name and home. It must not fight the
// new owner: no container of a's of the instance is left, nothing it does lands in the instance's history, the lease
// stays b's, and the instance keeps running on b (the same container).
import { afterAll, describe, expect, it } from 'vitest';
import { HELLO_APP_DIR, requireDockerAppBase, until } from '../../support/apps.ts';
import { cleanupClusters, createCluster } from '../../support/cluster-fixture.ts';
import { docker } from '../../support/docker.ts';

const TTL = 5000;
afterAll(cleanupClusters);

describe('a node that comes back after kill -9', () => {
  it(
    'finds its instance restarted on another node, its stale container removed by the survivor; ' +
      'it appends nothing, and the instance keeps running there',
    { timeout: 600_000 },
    async () => {
      await requireDockerAppBase();
      const cluster = await createCluster({ tag: 'rejoin', ttlMs: TTL });
      const { store } = cluster;
      let a = await cluster.startNode('a');
      const b = await cluster.startNode('b');
      const id = `rejoin-${process.pid}`;
      const spawned = cluster.cli(['spawn', HELLO_APP_DIR, '--sandbox', 'container', '--id', id, '--json'], a, 240_000);
      expect(spawned.code, spawned.stderr).toBe(0);
      const containers = (node: string) =>
        docker.listContainers({
          all: true,
          filters: JSON.stringify({ label: [`runlog.stream=instance-${id}`, `runlog.node=${node}`] }),
        });
      const onA = await containers('a');
      expect(onA.map((c) => c.State)).toEqual(['running']);
      const history = (): any[] => cluster.events(id);

      // kill -9 of a: its container runs on; b takes the instance over and runs it in a container of its own.
      await a.kill();
      const taken = await until(
        'b runs the instance',
        async () => {
          const h = history();
          const mine = await containers('b');
          return h.at(-1)?.type === 'instance.running' &&
            h.some((e) => e.type === 'instance.crashed') &&
            mine.some((c) => c.State === 'running')
            ? { h, mine }
            : null;
        },
        120_000,
        300,
      ).catch((err: Error) => {
        throw new Error(
          `${err.message}\nevents: ${JSON.stringify(history().slice(-5))}\nb: ${b.stderr().slice(-3000)}`,
        );
      });
      // a's copy is gone: b removed it from the Docker daemon they share as it took the instance over.
      expect(await containers('a')).toEqual([]);
      expect(b.stderr()).toMatch(
        new RegExp(`removed 1 container\\(s\\) of instance-${id} that a left on this Docker daemon \\(1 running\\)`),
      );
      const lease = await cluster.sql<{ node: string; token: string }>(
        'SELECT node, token FROM leases WHERE stream = $1',
        [`instance-${id}`],
      );
      expect(lease.map((l) => l.node)).toEqual(['b']);
      const bContainer = taken.mine.find((c) => c.State === 'running')!.Id;

      // a comes back (same name, same home): it has reconciled its host when it answers.
      a = await cluster.startNode('a');
      expect(await containers('a')).toEqual([]);
      // Nothing of a's landed: the history is what b left, the lease is b's with the same token, the instance runs
      // on b in the same container.
      await new Promise((r) => setTimeout(r, TTL)); // a full lease period with both nodes up
      expect(history()).toEqual(taken.h);
      expect(await cluster.sql('SELECT node, token FROM leases WHERE stream = $1', [`instance-${id}`])).toEqual(lease);
      expect((await containers('b')).filter((c) => c.State === 'running').map((c) => c.Id)).toEqual([bContainer]);
      expect(await containers('a')).toHaveLength(0);
      const row = JSON.parse(cluster.cli(['ps', '--json', '--store', store]).stdout).find((r: any) => r.id === id);
      expect(row).toMatchObject({ state: 'running', node: 'b', owner: 'b' });
      expect(a.stderr()).not.toContain('FENCED');
      // A stop through a is not a's to carry out (it does not own the instance): it is handed to the owner, b,
      // through the log; every event it adds is b's. Through b, a stop of the stopped instance answers as it is.
      const stopA = cluster.cli(['stop', id, '--json'], a);
      expect(stopA.code, stopA.stdout + stopA.stderr).toBe(0);
      expect(JSON.parse(stopA.stdout)).toMatchObject({ id, state: 'stopped' });
      const after = history();
      expect(after.slice(0, taken.h.length)).toEqual(taken.h);
      const added = after.slice(taken.h.length);
      expect(
        added.every((e) => e.meta.node === 'b'),
        JSON.stringify(added),
      ).toBe(true);
      expect(added.filter((e) => e.type === 'instance.stop-requested')).toEqual([
        expect.objectContaining({ meta: expect.objectContaining({ node: 'b', handover: expect.any(String) }) }),
      ]);
      const stopB = cluster.cli(['stop', id, '--json'], b);
      expect(stopB.code, stopB.stderr).toBe(0);
      expect(JSON.parse(stopB.stdout)).toMatchObject({ id, state: 'stopped' });
      expect(history()).toEqual(after);

      for (const code of await Promise.all([a, b].map((n) => n.stop()))) expect(code).toBe(0);
    },
  );
});
