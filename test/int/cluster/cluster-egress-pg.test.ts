// Network-granted executions in a cluster: two supervisors (nodes a and b) in this process, one log on the real
// PostgreSQL server, one Docker Engine, the real egress-proxy image and the in-process PDS. Every server the traffic
// may reach is the test's own (test/support/egress-servers.ts).
//
// Each node runs its own proxy, labelled with its own home: an execution placed on b goes out through b's proxy, and
// one run on a through a's. A node that restarts sweeps only what it left itself, never the proxy of a node that is
// alive beside it on the same Engine.
//
// It runs in the cluster lane, beside the int lane's files, whose clean-ups remove everything labelled
// runlog.test=1: what it makes is labelled runlog.test=egress-pg instead, and it cleans up only that.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import type { ExecutionContext } from '../../../src/machines/execution.machine.ts';
import { createRunlog, type Runlog, type RunlogOptions } from '../../../src/supervisor/runlog.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  docker,
  requireDocker,
  requireRegistry,
} from '../../support/docker.ts';
import { publishNetworkCode, startEgressServers, type EgressServers } from '../../support/egress-servers.ts';
import { startTestPds, type TestPds } from '../../support/pds.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';

/** This file's own test label (not TEST_LABELS: the int lane's clean-ups remove those while this file runs). */
const LABELS = { 'runlog.test': 'egress-pg' } as const;

const HANDLER = `
import http from 'node:http';
function get(url) {
  return new Promise((resolve) => {
    const req = http.request(url, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, body: body.slice(0, 100) }));
    });
    req.on('error', (e) => resolve({ error: e.code || e.message }));
    req.setTimeout(8000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}
export async function fetchBoth({ port }) {
  return { granted: await get('http://api.test:' + port + '/hello'), ungranted: await get('http://other.test:' + port + '/hello') };
}
`;

let pds: TestPds;
let net: EgressServers;
let root: string;
let uri: string;
let pgUrl: string;
let schema: string;
const nodes = new Map<string, Runlog>();

function optionsOf(node: string): RunlogOptions {
  return {
    home: join(root, `home-${node}`),
    store: `${pgUrl}?schema=${schema}`,
    node,
    leaseTtlMs: 10_000,
    policy: parseOperatorPolicy({
      network: { destinations: [{ host: 'api.test', ports: [net.port] }], allowRanges: [`${net.gateway}/32`] },
    }),
    egress: { resolvers: [net.resolver], outboundNetwork: net.outbound },
    atproto: { plcUrl: pds.plcUrl },
    labels: { ...LABELS },
    watchApps: false,
    metrics: false,
    log: () => undefined,
  };
}

/** The egress proxy containers on the Engine made by the supervisor of `home`. */
async function proxiesOf(home: string): Promise<string[]> {
  const own = { label: [`runlog.home=${home}`, 'runlog.egress=proxy'] };
  return (await docker.listContainers({ filters: JSON.stringify(own) })).map((c) => c.Id);
}

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  pgUrl = await requirePostgres();
  net = await startEgressServers('cluster', 1024, LABELS);
  pds = await startTestPds();
  root = mkdtempSync(join(tmpdir(), 'runlog-cluster-egress-'));
  ({ uri } = await publishNetworkCode(pds, root, 'egress-cluster.test', HANDLER));
  schema = testSchema('egress');
  for (const node of ['a', 'b']) nodes.set(node, await createRunlog(optionsOf(node)));
}, 240_000);

afterAll(async () => {
  for (const rl of nodes.values()) await rl.close().catch(() => undefined);
  await pds?.close();
  await net?.close();
  await cleanupTestContainers(LABELS);
  await cleanupTestVolumes(LABELS);
  if (pgUrl) await dropSchemas(pgUrl);
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('network-granted executions in a cluster', () => {
  it('go out through the proxy of the node that runs them, placed there or run where they were asked', async () => {
    const a = nodes.get('a')!;
    const served = net.served.length;
    const placed = await a.execute({ uri, handler: 'fetchBoth', input: { port: net.port }, node: 'b' });
    const local = await a.execute({ uri, handler: 'fetchBoth', input: { port: net.port }, node: 'a' });
    for (const out of [placed, local]) {
      expect(out.status, JSON.stringify(out)).toBe('succeeded');
      expect(out.output).toMatchObject({ granted: { status: 200, body: 'hello' }, ungranted: { status: 403 } });
    }
    expect(net.served.slice(served)).toEqual([`api.test:${net.port} /hello`, `api.test:${net.port} /hello`]);
    // Each ran on its node, and each node's history of it holds what that node's proxy saw.
    for (const [out, node] of [
      [placed, 'b'],
      [local, 'a'],
    ] as const) {
      const events = await a.events(out.executionId);
      expect(events.map((e) => (e.meta as { node?: string }).node)).toEqual(events.map(() => node));
      const view = await a.inspect(out.executionId);
      const steps = (view.context as unknown as ExecutionContext).steps;
      const egress = steps.filter((s) => s.name === 'egress').map((s) => s.detail as Record<string, unknown>);
      expect(egress.some((d) => d.host === 'api.test' && d.decision !== 'refused')).toBe(true);
      expect(egress.some((d) => d.host === 'other.test' && d.code === 'EGRESS_HOST_NOT_GRANTED')).toBe(true);
    }
    expect(await proxiesOf(join(root, 'home-a'))).toHaveLength(1);
    expect(await proxiesOf(join(root, 'home-b'))).toHaveLength(1);
  }, 180_000);

  it("leaves a live node's proxy alone when another node restarts, and the live node still answers", async () => {
    const before = await proxiesOf(join(root, 'home-b'));
    await nodes.get('a')!.close();
    nodes.set('a', await createRunlog(optionsOf('a')));
    expect(await proxiesOf(join(root, 'home-b'))).toEqual(before);
    const out = await nodes.get('a')!.execute({ uri, handler: 'fetchBoth', input: { port: net.port }, node: 'b' });
    expect(out.status, JSON.stringify(out)).toBe('succeeded');
    expect(out.output).toMatchObject({ granted: { status: 200 }, ungranted: { status: 403 } });
  }, 180_000);
});
