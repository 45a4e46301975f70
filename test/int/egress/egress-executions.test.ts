// Network for executions, through the egress proxy, against a hostile handler (issue 31). Real Docker, the real
// proxy image, the in-process PDS. Every server the traffic may reach is the test's own: an HTTP server and a DNS
// server on the gateway of an outbound network the test made (the proxy's way out). The policy grants two names on
// the HTTP server's port, and names the gateway's address as an allowed private range.
//
// The handler tries what a hostile one would: an ungranted name, a granted name that resolves to the metadata
// address the second time (rebinding), the server's IP directly, raw TCP and UDP around the proxy, the proxy's own
// control port, DNS through the sandbox's resolver and straight to the DNS server, IPv6, and a download past the
// byte limit. Only the granted requests answer; the execution's history records each attempt the proxy saw.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import type { ExecutionContext } from '../../../src/machines/execution.machine.ts';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  docker,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';
import { publishNetworkCode, startEgressServers, type EgressServers } from '../../support/egress-servers.ts';
import { startTestPds, type TestPds } from '../../support/pds.ts';
import { readFileSync } from 'node:fs';

const BYTE_LIMIT = 64 * 1024;
const BIG = 256 * 1024;

const HANDLER = `
import http from 'node:http';
import net from 'node:net';
import dgram from 'node:dgram';
import dns from 'node:dns/promises';
import { readFileSync } from 'node:fs';

const proxy = new URL(process.env.HTTP_PROXY);
// Plain Node: HTTP_PROXY and NODE_USE_ENV_PROXY, set by the runner, send this through the proxy.
function viaProxy(url) {
  return new Promise((resolve) => {
    const req = http.request(url, (res) => {
        let bytes = 0;
        const kept = [];
        res.on('data', (c) => { bytes += c.length; if (bytes <= 4096) kept.push(c); });
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(kept).toString('utf8').slice(0, 100), bytes }));
        res.on('error', (e) => resolve({ status: res.statusCode, error: e.code || e.message, bytes }));
        res.on('aborted', () => resolve({ status: res.statusCode, error: 'aborted', bytes }));
    });
    req.on('error', (e) => resolve({ error: e.code || e.message }));
    req.setTimeout(8000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}
function tcp(host, port) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const t = setTimeout(() => { s.destroy(); resolve('timeout'); }, 2000);
    s.on('connect', () => { clearTimeout(t); s.destroy(); resolve('connected'); });
    s.on('error', (e) => { clearTimeout(t); resolve(e.code || e.message); });
  });
}
function udp(host, port) {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    const t = setTimeout(() => { s.close(); resolve('timeout'); }, 1500);
    s.on('message', () => { clearTimeout(t); s.close(); resolve('answered'); });
    s.on('error', (e) => { clearTimeout(t); s.close(); resolve(e.code || e.message); });
    const q = Buffer.from([0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0x61, 0x70, 0x69, 4, 0x74, 0x65, 0x73, 0x74, 0, 0, 1, 0, 1]);
    s.send(q, port, host, (e) => { if (e) { clearTimeout(t); s.close(); resolve(e.code || e.message); } });
  });
}
const settle = (p) => p.then((v) => v, (e) => e.code || e.message);

export async function probe(input) {
  const { port, gateway, dnsPort } = input;
  const r = { kernel: readFileSync('/proc/version', 'utf8') };
  r.granted = await viaProxy('http://api.test:' + port + '/hello');
  r.ungranted = await viaProxy('http://other.test:' + port + '/hello');
  r.rebindFirst = await viaProxy('http://rebind.test:' + port + '/hello');
  r.rebindSecond = await viaProxy('http://rebind.test:' + port + '/hello');
  r.directIp = await viaProxy('http://' + gateway + ':' + port + '/hello');
  r.rawTcp = await tcp(gateway, port);
  r.proxyControl = await tcp(proxy.hostname, 3130);
  r.udp = await udp(gateway, dnsPort);
  r.dnsLookup = await settle(dns.lookup('api.test').then((a) => a.address));
  const direct = new dns.Resolver({ timeout: 1500, tries: 1 });
  direct.setServers([gateway + ':' + dnsPort]);
  r.dnsDirect = await settle(direct.resolve4('api.test'));
  r.ipv6 = await tcp('fd00::1', port);
  r.tooBig = await viaProxy('http://api.test:' + port + '/big');
  return r;
}
`;

let pds: TestPds;
let rl: Runlog;
let root: string;
let home: string;
let uri: string;
let runtimeUri = '';
let net: EgressServers;

/** The operator's policy: two granted names on the test server's port, its gateway an allowed private range. */
function policyOf(isolation: 'runc' | 'runsc') {
  return parseOperatorPolicy({
    isolation,
    // Its runtime's publisher is trusted to pre-start: a network-granted execution must still never take one.
    prestart: { publishers: [runtimeUri.split('/')[2]!] },
    network: {
      destinations: [
        { host: 'api.test', ports: [net.port] },
        { host: 'rebind.test', ports: [net.port] },
      ],
      allowRanges: [`${net.gateway}/32`],
      limits: { bytes: BYTE_LIMIT, seconds: 60, connections: 4 },
    },
  });
}

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  net = await startEgressServers('exec', BIG);
  pds = await startTestPds();
  root = mkdtempSync(join(tmpdir(), 'runlog-egress-'));
  ({ uri, runtimeUri } = await publishNetworkCode(pds, root, 'egress.test', HANDLER));
  home = join(root, 'home');
  rl = await createRunlog({
    home,
    policy: policyOf('runc'),
    egress: { resolvers: [net.resolver], outboundNetwork: net.outbound },
    atproto: { plcUrl: pds.plcUrl },
    labels: { ...TEST_LABELS },
    log: () => undefined,
  });
}, 240_000);

afterAll(async () => {
  await rl?.close();
  await pds?.close();
  await net?.close();
  await cleanupTestContainers();
  await cleanupTestVolumes();
  if (root) rmSync(root, { recursive: true, force: true });
});

type Step = { name: string; detail: Record<string, unknown> };

/**
 * Runs the hostile probe on `on` and checks that only the grant got through, and that its history says so. Returns
 * the kernel the handler saw (/proc/version).
 */
async function expectProbeContained(on: Runlog): Promise<string> {
  const servedBefore = net.served.length;
  const askedBefore = net.dns.asked.length;
  const out = await on.execute({
    uri,
    handler: 'probe',
    input: { port: net.port, gateway: net.gateway, dnsPort: net.dns.port },
    timeoutMs: 90_000,
  });
  expect(out.status, JSON.stringify(out)).toBe('succeeded');

  const r = out.output as Record<string, any>;
  // The granted name answers through the proxy.
  expect(r.granted).toMatchObject({ status: 200, body: 'hello' });
  expect(r.rebindFirst).toMatchObject({ status: 200, body: 'hello' });
  // Refused by the proxy: an ungranted name, a granted name now resolving to the metadata address, an IP.
  for (const k of ['ungranted', 'rebindSecond', 'directIp']) expect(r[k]?.status, k).toBe(403);
  // Around the proxy there is no way: the network has no route out and no address of the host's.
  expect(r.rawTcp).not.toBe('connected');
  expect(r.proxyControl).not.toBe('connected');
  expect(r.udp).not.toBe('answered');
  expect(r.dnsLookup).not.toBe(net.gateway);
  expect(Array.isArray(r.dnsDirect)).toBe(false);
  expect(r.ipv6).not.toBe('connected');
  // Past the byte limit the download is cut.
  expect(r.tooBig.bytes ?? 0).toBeLessThan(BIG);

  // The servers saw only what was granted.
  expect(net.served.slice(servedBefore).filter((s) => s.endsWith('/hello'))).toEqual([
    `api.test:${net.port} /hello`,
    `rebind.test:${net.port} /hello`,
  ]);
  expect(net.dns.asked.slice(askedBefore).some((q) => q.includes('other.test'))).toBe(false);

  // The history: one egress step per attempt the proxy saw, then the usage.
  const view = await on.inspect(out.executionId);
  const steps = (view.context as unknown as ExecutionContext).steps as Step[];
  const egress = steps.filter((s) => s.name === 'egress').map((s) => s.detail);
  const refusedWith = (code: string) => egress.filter((d) => d.decision === 'refused' && d.code === code);
  expect(refusedWith('EGRESS_HOST_NOT_GRANTED').map((d) => d.host)).toContain('other.test');
  expect(refusedWith('EGRESS_ADDRESS_FORBIDDEN').map((d) => d.host)).toContain('rebind.test');
  expect(refusedWith('EGRESS_DIRECT_IP').map((d) => d.host)).toContain(net.gateway);
  // DNS from the sandbox reaches no resolver: Docker's own does not forward from an internal network, and what
  // would be forwarded goes to the proxy, which refuses it.
  expect(egress.filter((d) => d.kind === 'dns' && d.decision !== 'refused')).toEqual([]);
  expect(egress.some((d) => d.code === 'EGRESS_BYTES_EXCEEDED')).toBe(true);
  expect(egress.filter((d) => d.decision === 'allowed' || d.decision === 'closed').length).toBeGreaterThan(0);
  // Its sandbox was made for it, on its network: never a pre-started one.
  expect((view.context as unknown as ExecutionContext).profile?.prestarted).toBe(false);
  const usage = steps.find((s) => s.name === 'egress.usage')?.detail;
  expect(usage).toMatchObject({ stopped: 'EGRESS_BYTES_EXCEEDED' });
  expect(Number(usage?.refused)).toBeGreaterThanOrEqual(3);
  return String(r.kernel);
}

describe('an execution granted network, through the egress proxy', () => {
  it('reaches the granted host; every way around the grant fails, and its history records what the proxy saw', async () => {
    expect(await expectProbeContained(rl)).toBe(readFileSync('/proc/version', 'utf8'));
  }, 180_000);

  it('is contained just the same under gVisor, whose sandbox runs on its networked runtime', async () => {
    const gvisor = await createRunlog({
      home: join(root, 'home-gvisor'),
      policy: policyOf('runsc'),
      egress: { resolvers: [net.resolver], outboundNetwork: net.outbound },
      atproto: { plcUrl: pds.plcUrl },
      labels: { ...TEST_LABELS },
      log: () => undefined,
    });
    try {
      // The kernel the handler saw is gVisor's, not the host's: it ran in gVisor, with a network.
      expect(await expectProbeContained(gvisor)).not.toBe(readFileSync('/proc/version', 'utf8'));
    } finally {
      await gvisor.close();
    }
  }, 180_000);

  it('leaves no execution network behind once it answered, and no proxy once the supervisor closed', async () => {
    // The network goes with the execution's cleanup, after its answer (idle waits for that).
    await rl.idle();
    const own = { label: [`runlog.home=${home}`, 'runlog.egress'] };
    const networks = (await docker.listNetworks({ filters: JSON.stringify(own) })) as {
      Labels: Record<string, string>;
    }[];
    expect(networks.filter((n) => n.Labels['runlog.egress'] === 'execution')).toEqual([]);
    await rl.close();
    const proxies = await docker.listContainers({ all: true, filters: JSON.stringify(own) });
    expect(proxies).toEqual([]);
    const after = (await docker.listNetworks({ filters: JSON.stringify(own) })) as unknown[];
    expect(after).toEqual([]);
  }, 60_000);

  it('removes, when it starts, the proxy and the execution network a supervisor that died left', async () => {
    // What a supervisor killed mid-execution leaves: its proxy container and an execution's network.
    const labels = { ...TEST_LABELS, 'runlog.home': home };
    const leftNetwork = `runlog-egress-left-${process.pid}`;
    await docker.createNetwork({
      Name: leftNetwork,
      Internal: true,
      Labels: { ...labels, 'runlog.egress': 'execution' },
    });
    const image = readFileSync('/var/lib/runlog-setup/images/egress-proxy.ref', 'utf8').trim();
    const left = await docker.createContainer({
      Image: image,
      Labels: { ...labels, 'runlog.egress': 'proxy', 'runlog.kind': 'egress-proxy' },
      HostConfig: { NetworkMode: 'none' },
    });
    rl = await createRunlog({
      home,
      egress: { resolvers: [net.resolver], outboundNetwork: net.outbound },
      atproto: { plcUrl: pds.plcUrl },
      labels: { ...TEST_LABELS },
      log: () => undefined,
    });
    // The proxy is a stray its reconcile removed; the network goes after it, in the background idle() waits for.
    await rl.idle();
    expect(
      await docker
        .getContainer(left.id)
        .inspect()
        .catch(() => null),
    ).toBeNull();
    expect(
      await docker
        .getNetwork(leftNetwork)
        .inspect()
        .catch(() => null),
    ).toBeNull();
  }, 60_000);
});
