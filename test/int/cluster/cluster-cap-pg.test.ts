// `cap grant` / `cap revoke` on a cluster reach every running instance of the app, whatever node owns it: three
// real supervisors (`runlog serve --store postgres://… --node a|b|c`, homes of their own) on the real PostgreSQL
// server (a schema of this test's), real container instances on the real Docker Engine.
// - an app with instances on a, b and c; `cap grant` through b's CLI: every instance gets the tool (its
//   /aura/my-tools answers it, no respawn), each instance's event appended once, by its owner, naming the app
//   event; the answer says which node changed which instance; `cap revoke` through c's API likewise;
// - the owner down: b SIGSTOPped, a grant through a is recorded (the answer does not claim b's instance changed
//   unless a survivor had already taken it over and applied it), b killed -9: the survivor that takes b's
//   instance over restarts it with the tool and its event is the survivor's, once.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { copyDereferenced } from '../../../src/adapters/apps/copy-dereferenced.ts';
import { getJson, HELLO_APP_DIR, requireDockerAppBase, until } from '../../support/apps.ts';
import { runCli } from '../../support/cli-process.ts';
import {
  cleanupClusters,
  createCluster,
  type ClusterNode,
  type ClusterEventRow,
} from '../../support/cluster-fixture.ts';

const TTL = 5000;
const APP = 'com.example.capcluster';
afterAll(cleanupClusters);

type Ev = ClusterEventRow;

describe('cap grant and revoke on a cluster', () => {
  it(
    'reach the instances of every node, each appended once by its owner; a survivor applies what a dead owner missed',
    { timeout: 900_000 },
    async () => {
      await requireDockerAppBase();
      const cluster = await createCluster({ tag: 'capclu', ttlMs: TTL });
      const events = (stream: string) =>
        cluster.sql<Ev>('SELECT seq::int, stream, type, data, meta FROM events WHERE stream = $1 ORDER BY seq', [
          stream,
        ]);
      const owner = async (id: string) =>
        (await cluster.sql<{ node: string }>('SELECT node FROM leases WHERE stream = $1', [`instance-${id}`]))[0]
          ?.node ?? null;
      const appDir = join(cluster.root, 'app');
      copyDereferenced(HELLO_APP_DIR, appDir);
      const base = JSON.parse(readFileSync(join(HELLO_APP_DIR, 'runlog.json'), 'utf8'));
      writeFileSync(
        join(appDir, 'runlog.json'),
        JSON.stringify({ ...base, appId: APP, tools: ['bash', 'node'] }, null, 2),
      );

      const [a, b, c] = [await cluster.startNode('a'), await cluster.startNode('b'), await cluster.startNode('c')];
      const cli = (via: ClusterNode, args: string[]) =>
        runCli([...args, '--json'], { home: via.home, timeoutMs: 180_000 });
      const spawn = (id: string, node: string) => {
        const r = cli(a, ['spawn', appDir, '--sandbox', 'container', '--id', id, '--node', node]);
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(JSON.parse(r.stdout)).toMatchObject({ id, state: 'running' });
      };
      const view = (id: string) => {
        const r = cluster.cli(['inspect', id, '--json', '--store', cluster.store]);
        expect(r.code, r.stderr).toBe(0);
        return JSON.parse(r.stdout) as {
          state: string;
          context: {
            host: string;
            port: number;
            pid: number | null;
            containerId: string | null;
            spec: { tools: string[] };
          };
        };
      };
      const which = async (id: string, tool: string) => {
        const ctx = view(id).context;
        return (await getJson(ctx.host, ctx.port, `/which?name=${tool}`)).body.path as string | null;
      };
      /** The instance events that carry out the app event at `seq` (meta.cap), as the database holds them. */
      const carried = async (id: string, seq: number) =>
        (await events(`instance-${id}`)).filter((e) => e.meta?.cap === seq);

      const tag = process.pid;
      const [i1, i2, i3] = [`c1-${tag}`, `c2-${tag}`, `c3-${tag}`];
      spawn(i1, 'a');
      spawn(i2, 'b');
      spawn(i3, 'c');
      expect([await owner(i1), await owner(i2), await owner(i3)]).toEqual(['a', 'b', 'c']);
      const containers = Object.fromEntries([i1, i2, i3].map((id) => [id, view(id).context.containerId]));
      for (const id of [i1, i2, i3]) expect(await which(id, 'git')).toBeNull();

      // grant through b's CLI: every node applies it to what it owns, and the answer says which node changed which.
      const g = cli(b, ['cap', 'grant', APP, 'git']);
      expect(g.code, g.stdout + g.stderr).toBe(0);
      const granted = JSON.parse(g.stdout);
      expect(granted).toMatchObject({
        appId: APP,
        tool: 'git',
        granted: true,
        tools: ['bash', 'node', 'git'],
        pending: [],
      });
      expect([...granted.changed].sort((x: any, y: any) => x.node.localeCompare(y.node))).toEqual([
        { instanceId: i1, node: 'a' },
        { instanceId: i2, node: 'b' },
        { instanceId: i3, node: 'c' },
      ]);
      expect([...granted.instances].sort()).toEqual([i1, i2, i3].sort());
      const grantEvent = (await events(`app-${APP}`)).at(-1)!;
      expect(grantEvent).toMatchObject({
        seq: granted.seq,
        type: 'app.tool-granted',
        data: { appId: APP, tool: 'git', via: 'cap' },
        meta: { node: 'b' },
      });
      for (const [id, node] of [
        [i1, 'a'],
        [i2, 'b'],
        [i3, 'c'],
      ] as const) {
        expect(await carried(id, granted.seq)).toEqual([
          expect.objectContaining({
            type: 'instance.tool-granted',
            data: { tool: 'git', via: 'cap' },
            meta: expect.objectContaining({ node }),
          }),
        ]);
        expect(view(id).context.spec.tools).toEqual(['bash', 'node', 'git']);
        expect(await until(`git in ${id}'s /aura/my-tools`, () => which(id, 'git'))).toBe('/aura/my-tools/git');
        expect(view(id).context.containerId).toBe(containers[id]); // no respawn
      }

      // revoke through c's API (a tool the manifest lists): the same on every node.
      const rv = await c.api('DELETE', `/api/apps/${APP}/tools/bash`);
      expect(rv, JSON.stringify(rv.body)).toMatchObject({
        status: 200,
        body: { appId: APP, tool: 'bash', granted: false, tools: ['node', 'git'], pending: [] },
      });
      expect(new Set(rv.body.changed.map((x: any) => `${x.instanceId}@${x.node}`))).toEqual(
        new Set([`${i1}@a`, `${i2}@b`, `${i3}@c`]),
      );
      for (const [id, node] of [
        [i1, 'a'],
        [i2, 'b'],
        [i3, 'c'],
      ] as const) {
        expect(await carried(id, rv.body.seq)).toEqual([
          expect.objectContaining({
            type: 'instance.tool-revoked',
            data: { tool: 'bash', via: 'cap' },
            meta: expect.objectContaining({ node }),
          }),
        ]);
        expect(view(id).context.spec.tools).toEqual(['node', 'git']);
        await until(
          `bash gone from ${id}'s /aura/my-tools`,
          async () => (await which(id, 'bash')) !== '/aura/my-tools/bash',
        );
      }
      // Asked again: recorded again, nothing left to change anywhere.
      const again = cli(a, ['cap', 'revoke', APP, 'bash']);
      expect(again.code, again.stderr).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({ changed: [], instances: [], pending: [] });
      for (const id of [i1, i2, i3]) expect(await carried(id, JSON.parse(again.stdout).seq)).toEqual([]);

      // The owner down: b stopped before the grant is recorded, then killed -9. b never applies it; the survivor that
      // takes i2 over brings it to the app's words as the log has them (the restart has curl), once.
      b.signal('SIGSTOP');
      const down = await a.api('POST', `/api/apps/${APP}/tools`, { tool: 'curl' });
      expect(down.status, JSON.stringify(down.body)).toBe(200);
      const curlSeq = down.body.seq as number;
      expect(
        new Set(down.body.changed.filter((x: any) => x.instanceId !== i2).map((x: any) => `${x.instanceId}@${x.node}`)),
      ).toEqual(new Set([`${i1}@a`, `${i3}@c`]));
      // i2 is pending (at b, which cannot act, or at a survivor that has just taken it over), unless a survivor
      // already took it over and applied it within the call's wait: never claimed changed by b.
      const i2Changed = down.body.changed.find((x: any) => x.instanceId === i2);
      if (i2Changed) expect(['a', 'c']).toContain(i2Changed.node);
      else expect(down.body.pending).toEqual([{ instanceId: i2, node: expect.stringMatching(/^[abc]$/) }]);
      expect(down.body.changed.length + down.body.pending.length).toBe(3);
      b.signal('SIGKILL');
      await b.served.exit;

      const survivor = await until(
        'a survivor owns i2',
        async () => {
          const o = await owner(i2);
          return o === 'a' || o === 'c' ? o : null;
        },
        60_000,
        200,
      );
      const applied = await until(
        'the survivor applied curl to i2',
        async () => {
          const rows = await carried(i2, curlSeq);
          return rows.length > 0 ? rows : null;
        },
        60_000,
        200,
      );
      expect(applied).toEqual([
        expect.objectContaining({
          type: 'instance.tool-granted',
          data: { tool: 'curl', via: 'cap' },
          meta: expect.objectContaining({ node: survivor }),
        }),
      ]);
      const h2 = await events(`instance-${i2}`);
      const firstBySurvivor = h2.find((e) => e.meta.node === survivor)!;
      expect(firstBySurvivor.type).not.toBe('instance.tool-granted'); // what the survivor knows is recorded first
      expect(h2.filter((e) => e.type === 'instance.tool-granted' && e.data.tool === 'curl')).toHaveLength(1);
      await until('i2 running again on the survivor', () => view(i2).state === 'running', 120_000, 250);
      expect(view(i2).context.spec.tools).toEqual(['node', 'git', 'curl']);
      expect(await until('curl in the restarted i2', () => which(i2, 'curl'))).toBe('/aura/my-tools/curl');
      for (const id of [i1, i3]) expect(await which(id, 'curl')).toBe('/aura/my-tools/curl');
      // Nothing applied it twice meanwhile (the survivor's later beats and start-up looks find nothing to do).
      for (const id of [i1, i2, i3]) expect(await carried(id, curlSeq)).toHaveLength(1);

      expect(await a.stop(), a.stderr().slice(-3000)).toBe(0);
      expect(await c.stop(), c.stderr().slice(-3000)).toBe(0);
    },
  );
});
