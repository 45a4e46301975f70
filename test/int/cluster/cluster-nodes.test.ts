// The nodes of a cluster, as an operator sees them: two real supervisors (`runlog serve --store postgres://…
// --node a|b`, real processes) on a schema of their own on the real PostgreSQL server, each running a real PRoot
// app. Any node's API (GET /api/nodes), `runlog nodes` and the inspector's Nodes card (real chromium) show both
// nodes live with their heartbeats and the actor each owns (lease token, expiry). After kill -9 of a, the same
// views show a gone and its actor owned by b with a new token.
import type { Browser } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { parsePortRange } from '../../../src/cli/port-range.ts';
import { HELLO_APP_DIR, requireProot, until } from '../../support/apps.ts';
import { launchChromium } from '../../support/browser.ts';
import { cleanupClusters, createCluster, type ClusterNode } from '../../support/cluster-fixture.ts';

const TTL = 4000;
let browser: Browser | undefined;
afterAll(async () => {
  await browser?.close();
  await cleanupClusters();
});

async function nodesApi(n: ClusterNode): Promise<any> {
  const res = await n.api('GET', '/api/nodes');
  expect(res.status).toBe(200);
  return res.body;
}

describe('the nodes of a cluster', () => {
  it(
    'GET /api/nodes, runlog nodes and the inspector show each node, its heartbeat, ' +
      'whether it is live and what it owns; after kill -9 of one, its actor is owned by the survivor',
    { timeout: 300_000 },
    async () => {
      requireProot();
      const cluster = await createCluster({ tag: 'nodes', ttlMs: TTL });
      const { store } = cluster;
      const a = await cluster.startNode('a');
      const b = await cluster.startNode('b');
      const ida = `na-${process.pid}`;
      const idb = `nb-${process.pid}`;
      for (const [n, id] of [
        [a, ida],
        [b, idb],
      ] as const) {
        const r = cluster.cli(['spawn', HELLO_APP_DIR, '--sandbox', 'proot', '--id', id, '--json'], n);
        expect(r.code, r.stderr).toBe(0);
        // The int-cluster lane gives its supervisors their own ports ($RUNLOG_PORTS, vitest.config.ts): the int
        // lane's PRoot instances, running at the same time on 4100–4999, can never answer on theirs.
        expect(process.env.RUNLOG_PORTS, 'the int-cluster project of vitest.config.ts sets RUNLOG_PORTS').toMatch(
          /^\d+-\d+$/,
        );
        const { min, max } = parsePortRange(process.env.RUNLOG_PORTS!);
        expect(min).toBeGreaterThan(4999);
        const { port } = JSON.parse(r.stdout).context;
        expect(port).toBeGreaterThanOrEqual(min);
        expect(port).toBeLessThanOrEqual(max);
      }

      // Any node's API shows both nodes, live, and the actor each owns.
      const view = await nodesApi(b);
      expect(view).toMatchObject({ cluster: true, unowned: [] });
      expect(view.nodes.map((n: any) => [n.node, n.live, n.pid, n.stoppedAt])).toEqual([
        ['a', true, a.info.pid, null],
        ['b', true, b.info.pid, null],
      ]);
      for (const n of view.nodes) {
        expect(n.ageMs).toBeGreaterThanOrEqual(0);
        expect(Date.parse(n.beatAt)).toBeGreaterThan(0);
      }
      const ownsA = view.nodes[0].owns;
      expect(ownsA).toEqual([expect.objectContaining({ id: ida, kind: 'instance', state: 'running', expired: false })]);
      expect(ownsA[0].expiresInMs).toBeGreaterThan(0);
      expect(ownsA[0].expiresInMs).toBeLessThanOrEqual(TTL);
      expect(view.nodes[1].owns).toEqual([
        expect.objectContaining({ id: idb, kind: 'instance', state: 'running', expired: false }),
      ]);
      const tokenBefore = ownsA[0].token as number;

      // `runlog nodes` (a one-shot reader with no home of its own) reads the same.
      const cli = cluster.cli(['nodes', '--json', '--store', store]);
      expect(cli.code, cli.stderr).toBe(0);
      const fromCli = JSON.parse(cli.stdout);
      expect(fromCli.nodes.map((n: any) => [n.node, n.live, n.owns.map((o: any) => o.id)])).toEqual([
        ['a', true, [ida]],
        ['b', true, [idb]],
      ]);
      const text = cluster.cli(['nodes', '--store', store]);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toMatch(/NODE\s+STATUS\s+HOST\s+PID\s+HEARTBEAT\s+AGE\s+OWNS/);
      expect(text.stdout).toMatch(new RegExp(`\\ba\\s+live\\s+\\S+\\s+${a.info.pid}\\s`));
      expect(text.stdout).toMatch(new RegExp(`${ida}\\s+instance\\s+running\\s+a\\s+${tokenBefore}\\s+in `));

      // The inspector's Nodes card, in a real browser, on b's server.
      browser = await launchChromium();
      const page = await browser.newPage();
      await page.goto(`${b.info.url.replace(/\/$/, '')}/#token=${b.token}`);
      const rows = page.locator('[data-testid=node-row]');
      await expect
        .poll(
          () =>
            rows.evaluateAll((els) => els.map((e) => `${e.getAttribute('data-node')}:${e.getAttribute('data-live')}`)),
          { timeout: 20_000 },
        )
        .toEqual(['a:true', 'b:true']);
      expect(
        await page
          .locator('[data-testid=node-row][data-node=a] [data-testid=node-owns]')
          .evaluateAll((els) => els.map((e) => e.getAttribute('data-actor-id'))),
      ).toEqual([ida]);
      expect(await page.locator('[data-testid=node-row][data-node=a] [data-testid=node-owns]').innerText()).toContain(
        `token ${tokenBefore}`,
      );

      // kill -9 of a: its lease expires, b takes the actor over (new token); a stops beating and shows gone.
      await a.kill();
      const after = await until(
        "b owns a's actor and a is no longer live",
        async () => {
          const v = await nodesApi(b);
          const na = v.nodes.find((n: any) => n.node === 'a');
          const nb = v.nodes.find((n: any) => n.node === 'b');
          return !na.live && nb.owns.some((o: any) => o.id === ida) ? v : null;
        },
        120_000,
        250,
      );
      const na = after.nodes.find((n: any) => n.node === 'a');
      expect(na).toMatchObject({ live: false, stoppedAt: null, owns: [] });
      // Gone: more than three of its beats missed.
      expect(na.ageMs).toBeGreaterThan(3 * na.intervalMs);
      const taken = after.nodes.find((n: any) => n.node === 'b').owns.find((o: any) => o.id === ida);
      expect(taken.token).toBeGreaterThan(tokenBefore);
      expect(taken.expired).toBe(false);
      expect(after.nodes.map((n: any) => n.node)).toEqual(['b', 'a']); // live first
      await expect
        .poll(
          () =>
            rows.evaluateAll((els) => els.map((e) => `${e.getAttribute('data-node')}:${e.getAttribute('data-live')}`)),
          { timeout: 20_000 },
        )
        .toEqual(['b:true', 'a:false']);
      await expect
        .poll(() =>
          page
            .locator('[data-testid=node-row][data-node=b] [data-testid=node-owns]')
            .evaluateAll((els) => els.map((e) => e.getAttribute('data-actor-id')).sort()),
        )
        .toEqual([ida, idb].sort());
      expect(await page.locator('[data-testid=node-row][data-node=a] [data-testid=node-status]').innerText()).toBe(
        'gone',
      );

      expect(await b.stop()).toBe(0);
      // A clean stop is shown as such.
      const stopped = JSON.parse(cluster.cli(['nodes', '--json', '--store', store]).stdout);
      expect(stopped.nodes.find((n: any) => n.node === 'b')).toMatchObject({
        live: false,
        stoppedAt: expect.any(String),
      });
    },
  );
});
