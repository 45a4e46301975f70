// At most one running copy of an instance across a cluster: real supervisors (`runlog serve --store postgres://…
// --node a|b`), the real PostgreSQL server, one real Docker daemon; containers are looked up in Docker's own listing
// and events by their runlog.stream and runlog.node labels.
// - The lease lost in the middle of a container spawn (a is SIGSTOPped past the TTL while its app is starting): b
//   takes the instance over (removing a's copy from the Docker daemon they share) and restarts it; the woken a
//   does not bring its spawn back, and none of a's containers is left once a's app would have become healthy.
//   (That a spawn refused or let go of removes what it started is test/unit/cluster/instance-spawn-fence.test.ts.)
// - A node cut off PostgreSQL (its connections through a proxy that is cut) cannot renew its leases: it stops its
//   own container of the instance before its lease expires (b finds no running copy of a's to remove), so Docker
//   records that container's death before b's copy starts; once a reaches PostgreSQL again it lets go of the
//   instance and only b's copy runs.
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HELLO_APP_DIR, requireDockerAppBase, until } from '../../support/apps.ts';
import { cleanupClusters, createCluster } from '../../support/cluster-fixture.ts';
import { docker, watchContainerEvents } from '../../support/docker.ts';
import { requirePostgres } from '../../support/postgres.ts';
import { startTcpCutProxy, type TcpCutProxy } from '../../support/tcp-cut-proxy.ts';

const TTL = 3000;
let proxy: TcpCutProxy | undefined;
afterAll(async () => {
  await cleanupClusters();
  await proxy?.close();
});

const containersOf = (id: string, node: string) =>
  docker.listContainers({
    all: true,
    filters: JSON.stringify({ label: [`runlog.stream=instance-${id}`, `runlog.node=${node}`] }),
  });

describe('one running copy of an instance', () => {
  it(
    'a node that loses the lease while its container is starting is left with no container of the instance; only the new owner runs it',
    { timeout: 600_000 },
    async () => {
      await requireDockerAppBase();
      const cluster = await createCluster({ tag: 'fencespawn', ttlMs: TTL });
      // An app that takes a while to answer its health check: its spawn is in flight for that long.
      const SLOW_S = 15;
      const app = mkdtempSync(join(cluster.root, 'slow-app-'));
      cpSync(HELLO_APP_DIR, app, { recursive: true, dereference: true });
      writeFileSync(join(app, 'entrypoint.sh'), `#!/bin/bash\nsleep ${SLOW_S}\nexec node server.mjs\n`);
      const a = await cluster.startNode('a');
      const b = await cluster.startNode('b');
      const id = `fencespawn-${process.pid}`;
      const answer = a
        .api('POST', '/api/instances', { appDir: app, sandbox: 'container', instanceId: id })
        .catch((err: Error) => ({ status: 0, body: err.message }));
      // a's container exists and its app is not healthy yet: the spawn is in flight.
      await until(
        "a's container of the instance is created",
        async () => (await containersOf(id, 'a')).some((c) => c.State === 'running'),
        120_000,
        100,
      );
      expect(cluster.events(id).map((e) => e.type)).not.toContain('instance.spawned');

      a.signal('SIGSTOP');
      await until(
        'b takes the instance over',
        async () =>
          (await cluster.sql('SELECT node FROM leases WHERE stream = $1', [`instance-${id}`]))[0]?.node === 'b',
        TTL * 10,
        100,
      );
      a.signal('SIGCONT');
      await until(
        "a's container of the instance is gone",
        async () => (await containersOf(id, 'a')).length === 0,
        60_000,
        200,
      ).catch(async (err: Error) => {
        throw new Error(
          `${err.message}\ncontainers on a: ${JSON.stringify((await containersOf(id, 'a')).map((c) => c.State))}\n` +
            `a: ${a.stderr().slice(-3000)}`,
        );
      });
      // Past the time a's app would have answered its health check: nothing of a's came back, the instance runs on b.
      const history = await until(
        'b runs the instance',
        () => {
          const h = cluster.events(id);
          return h.at(-1)?.type === 'instance.running' && h.some((e) => e.type === 'instance.crashed') ? h : null;
        },
        120_000,
        300,
      );
      expect(await containersOf(id, 'a')).toEqual([]);
      expect((await containersOf(id, 'b')).map((c) => c.State)).toEqual(['running']);
      expect(history.filter((e) => e.type === 'instance.spawned').map((e) => e.meta.node)).toEqual(['b']);
      expect(history.filter((e) => e.type === 'instance.crashed')).toEqual([
        expect.objectContaining({ data: expect.objectContaining({ reason: 'node-lost' }) }),
      ]);
      // a's request was answered (typed) or cut: it appended nothing after the takeover.
      await answer;
      expect(cluster.events(id)).toEqual(history);
      expect(a.stderr()).toContain('lost the lease');

      for (const code of await Promise.all([a, b].map((n) => n.stop()))) expect(code).toBe(0);
    },
  );

  it(
    'a node cut off PostgreSQL stops its own container of the instance before another node starts one; ' +
      'back, it lets go and only the owner runs it',
    { timeout: 600_000 },
    async () => {
      await requireDockerAppBase();
      const url = new URL(await requirePostgres());
      proxy = await startTcpCutProxy({ host: url.hostname, port: Number(url.port || 5432) });
      const cluster = await createCluster({ tag: 'fencecut', ttlMs: TTL });
      const viaProxy = new URL(cluster.store);
      viaProxy.host = `127.0.0.1:${proxy.port}`;
      // a reaches PostgreSQL through the proxy only (the last --store wins).
      const a = await cluster.startNode('a', ['--store', viaProxy.toString()]);
      const b = await cluster.startNode('b');
      const id = `fencecut-${process.pid}`;
      const spawned = await a.api('POST', '/api/instances', {
        appDir: HELLO_APP_DIR,
        sandbox: 'container',
        instanceId: id,
      });
      expect(spawned.status, JSON.stringify(spawned.body)).toBe(201);
      expect(spawned.body).toMatchObject({ state: 'running' });
      const [onA] = await containersOf(id, 'a');
      expect(onA?.State).toBe('running');
      const before = cluster.events(id);

      const events = await watchContainerEvents();
      try {
        proxy.cut();
        const history = await until(
          'b records the instance lost with its node and runs it again',
          async () => {
            const h = cluster.events(id);
            const onB = await containersOf(id, 'b');
            return h.at(-1)?.type === 'instance.running' &&
              h.some((e) => e.type === 'instance.crashed') &&
              onB.some((c) => c.State === 'running')
              ? h
              : null;
          },
          120_000,
          300,
        );
        // a, still cut off, has stopped its copy: Docker saw it die before b's copy started.
        await events.settled();
        const seen = events
          .events({ [`runlog.stream`]: `instance-${id}` })
          .map((e) => `${e.action} ${e.labels['runlog.node']}`);
        const diedOnA = seen.indexOf('die a');
        const startedOnB = seen.indexOf('start b');
        expect(diedOnA, seen.join(', ')).toBeGreaterThanOrEqual(0);
        expect(startedOnB, seen.join(', ')).toBeGreaterThan(diedOnA);
        expect(await containersOf(id, 'a')).toEqual([]);
        expect(a.stderr()).toContain('self-fence: no lease renewal answered');
        // a had stopped it before its lease expired: b, taking the instance over, found no running copy of a's to
        // remove from the Docker daemon they share.
        expect(b.stderr()).not.toMatch(/that a left on this Docker daemon \([1-9]\d* running\)/);
        expect(history.slice(0, before.length)).toEqual(before);
        expect(
          history.slice(before.length).every((e) => e.meta.node === 'b'),
          JSON.stringify(history.slice(before.length)),
        ).toBe(true);

        // Back on PostgreSQL: a finds the lease taken and lets go of the instance; it appends nothing for it, and
        // only b's copy runs.
        proxy.restore();
        await until('a notices it lost the lease', () => a.stderr().includes('lost the lease'), TTL * 10, 100).catch(
          (err: Error) => {
            throw new Error(`${err.message}\na: ${a.stderr().slice(-3000)}`);
          },
        );
        await new Promise((r) => setTimeout(r, TTL)); // a lease period with both nodes up
        expect(cluster.events(id)).toEqual(history);
        expect(await containersOf(id, 'a')).toEqual([]);
        expect((await containersOf(id, 'b')).map((c) => c.State)).toEqual(['running']);
        expect(await cluster.sql('SELECT node FROM leases WHERE stream = $1', [`instance-${id}`])).toEqual([
          { node: 'b' },
        ]);
      } finally {
        events.stop();
      }
      for (const code of await Promise.all([a, b].map((n) => n.stop()))) expect(code).toBe(0);
    },
  );
});
