// A `cap` change recorded while a node is down reaches its instances when it starts again (supervisor/instances/app-tool-sync.ts,
// the start-up look), not only on the app events it reads live or on a takeover: one real supervisor
// (`runlog serve --store postgres://… --node a`, a cluster of one, so nobody else could apply it) on the real
// PostgreSQL server (a schema of this test's), a real container instance on the real Docker Engine.
// - a stopped cleanly (SIGTERM): its container keeps running, its lease stays a's (reclaimed at start, no takeover);
// - the grant is recorded straight into the log (app-grants.ts recordToolChange on a store that is no node):
//   no supervisor runs to read it;
// - a started again: its instance gets the grant once (one instance.tool-granted, meta.cap = the app event's seq,
//   appended by a), the tool is in the adopted container's /aura/my-tools (no respawn), and a second start finds
//   nothing left to do.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { copyDereferenced } from '../../../src/adapters/apps/copy-dereferenced.ts';
import { recordToolChange } from '../../../src/supervisor/instances/app-grants.ts';
import { PgHostStore } from '../../../src/store/postgres/host-store.ts';
import { getJson, HELLO_APP_DIR, requireDockerAppBase, until } from '../../support/apps.ts';
import { runCli } from '../../support/cli-process.ts';
import { cleanupClusters, createCluster, type ClusterEventRow } from '../../support/cluster-fixture.ts';

const TTL = 5000;
const APP = 'com.example.capstartup';
afterAll(cleanupClusters);

describe('cap changes recorded while a node is down', () => {
  it('reach its instances at its next start, once', { timeout: 600_000 }, async () => {
    await requireDockerAppBase();
    const cluster = await createCluster({ tag: 'capstart', ttlMs: TTL });
    const events = (stream: string) =>
      cluster.sql<ClusterEventRow>(
        'SELECT seq::int, stream, type, data, meta FROM events WHERE stream = $1 ORDER BY seq',
        [stream],
      );
    const appDir = join(cluster.root, 'app');
    copyDereferenced(HELLO_APP_DIR, appDir);
    const base = JSON.parse(readFileSync(join(HELLO_APP_DIR, 'runlog.json'), 'utf8'));
    writeFileSync(
      join(appDir, 'runlog.json'),
      JSON.stringify({ ...base, appId: APP, tools: ['bash', 'node'] }, null, 2),
    );
    const view = (id: string) => {
      const r = cluster.cli(['inspect', id, '--json', '--store', cluster.store]);
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as {
        state: string;
        context: { host: string; port: number; containerId: string | null; spec: { tools: string[] } };
      };
    };
    const which = async (id: string, tool: string) => {
      const ctx = view(id).context;
      return (await getJson(ctx.host, ctx.port, `/which?name=${tool}`)).body.path as string | null;
    };
    const carried = async (id: string, seq: number) =>
      (await events(`instance-${id}`)).filter((e) => e.meta?.cap === seq);

    let a = await cluster.startNode('a');
    const i1 = `cs1-${process.pid}`;
    const spawned = runCli(['spawn', appDir, '--sandbox', 'container', '--id', i1, '--json'], {
      home: a.home,
      timeoutMs: 180_000,
    });
    expect(spawned.code, spawned.stdout + spawned.stderr).toBe(0);
    expect(JSON.parse(spawned.stdout)).toMatchObject({ id: i1, state: 'running' });
    const container = view(i1).context.containerId;
    expect(container).toBeTruthy();
    expect(await which(i1, 'git')).toBeNull();

    // a stops cleanly: the container keeps running, the lease stays a's.
    expect(await a.stop(), a.stderr().slice(-3000)).toBe(0);
    expect((await cluster.containers({ 'runlog.stream': `instance-${i1}` })).map((c) => c.State)).toEqual(['running']);

    // The grant, recorded while no supervisor runs: nobody reads it now.
    const writer = await PgHostStore.open({ url: cluster.store, pollMs: 0 });
    let seq: number;
    try {
      seq = (await recordToolChange(writer, APP, 'git', true)).seq;
    } finally {
      await writer.close();
    }
    expect(await carried(i1, seq)).toEqual([]);

    // a again: its start-up look brings i1 to the app's words (its own lease, reclaimed: no takeover).
    a = await cluster.startNode('a');
    const applied = await until(
      'a applied the grant at start-up',
      async () => {
        const rows = await carried(i1, seq);
        return rows.length > 0 ? rows : null;
      },
      60_000,
      200,
    );
    expect(applied).toEqual([
      expect.objectContaining({
        type: 'instance.tool-granted',
        data: { tool: 'git', via: 'cap' },
        meta: expect.objectContaining({ node: 'a' }),
      }),
    ]);
    const taken = (await events(`instance-${i1}`)).filter(
      (e) => e.meta?.node === 'a' && /lost|adopted|crashed/.test(e.type),
    );
    expect(taken.map((e) => e.type)).not.toContain('instance.lost'); // its own instance, not one it took over
    expect(await until('git in the adopted container', () => which(i1, 'git'), 60_000, 200)).toBe('/aura/my-tools/git');
    expect(view(i1).context.containerId).toBe(container); // no respawn
    expect(view(i1).context.spec.tools).toEqual(['bash', 'node', 'git']);

    // Started once more, then a change through its API (the same serial chain: answered after the start-up
    // look): the start-up look found nothing left to do for git.
    expect(await a.stop(), a.stderr().slice(-3000)).toBe(0);
    a = await cluster.startNode('a');
    const curl = await a.api('POST', `/api/apps/${APP}/tools`, { tool: 'curl' });
    expect(curl, JSON.stringify(curl.body)).toMatchObject({
      status: 200,
      body: { changed: [{ instanceId: i1, node: 'a' }] },
    });
    expect(await carried(i1, seq)).toHaveLength(1);
    expect(
      (await events(`instance-${i1}`)).filter((e) => e.type === 'instance.tool-granted' && e.data.tool === 'git'),
    ).toHaveLength(1);
    expect(await a.stop(), a.stderr().slice(-3000)).toBe(0);
  });
});
