// A network-granted execution, side by side with the raw primitive in the same run.
//
//   exec.net   runlog: a warm execution (runtime and code volumes cached) of a handler that makes one HTTP GET to a
//              local server through the egress proxy: rl.execute() until it answers, which includes the execution's
//              own internal network, the proxy joining it and the grant registered, and afterwards the grant removed
//              and the proxy's reports recorded. raw: one hardened container round trip (exec-raw.ts, the same
//              sandbox image, volumes, limits and envelope) on a plain bridge network, making the same GET straight
//              to the server's address, with no proxy and no grant. Target ≤ 1.3.
// The server and the name it is granted under are the bench's own: an HTTP server and a DNS server on the gateway of
// an outbound network the bench makes (the proxy's way out, and the raw container's network).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { parseOperatorPolicy } from '../src/domain/at-run/operator-policy.ts';
import { publishCode } from '../src/supervisor/executions/publishing.ts';
import { startDnsTestServer, type DnsTestServer } from '../test/support/dns-test-server.ts';
import { BENCH_LABELS, imageRef, openFixture, runlogOnce, type Fixture } from './exec.bench.ts';
import { rawRoundTrip, type RawCall } from './exec-raw.ts';
import { interleavedRounds, median, nowMs, sideBySide, sizes, type Bench, type BenchResult } from './harness.ts';

const NEEDS =
  'Docker, the registry at 127.0.0.1:5000, the runtime-node, at-run-sandbox and egress-proxy images, @atproto/dev-env';
const NAME = 'api.bench';

const HANDLER = `import http from 'node:http';
export function get(input) {
  return new Promise((resolve, reject) => {
    http.get(input.url, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, body }));
      res.on('error', reject);
    }).on('error', reject);
  });
}
`;

interface NetSide {
  network: string;
  gateway: string;
  port: number;
  server: Server;
  dns: DnsTestServer;
  close(): Promise<void>;
}

/** The outbound network, and on its gateway the HTTP server and the DNS server that names it. */
async function openNetSide(docker: Docker): Promise<NetSide> {
  const network = `runlog-bench-egress-out-${process.pid}`;
  await docker.createNetwork({ Name: network, Driver: 'bridge', Labels: { ...BENCH_LABELS } });
  const info = (await docker.getNetwork(network).inspect()) as { IPAM: { Config: { Gateway: string }[] } };
  const gateway = info.IPAM.Config[0]!.Gateway;
  const server = createServer((_req, res) => res.end('pong'));
  await new Promise<void>((r) => server.listen(0, gateway, r));
  const port = (server.address() as { port: number }).port;
  const dns = await startDnsTestServer((name) => (name === NAME ? [gateway] : []), gateway);
  return {
    network,
    gateway,
    port,
    server,
    dns,
    async close() {
      await dns.close();
      await new Promise((r) => server.close(r));
      await docker
        .getNetwork(network)
        .remove()
        .catch(() => undefined);
    },
  };
}

/** Publishes the GET handler with network requested, and reopens the supervisor with a policy granting NAME. */
async function grantNetwork(f: Fixture, net: NetSide, runtimeUri: string): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'runlog-bench-net-'));
  try {
    writeFileSync(join(root, 'index.mjs'), HANDLER);
    const code = await publishCode(f.author.publisher, {
      dir: root,
      runtime: runtimeUri,
      entrypoint: 'index.mjs',
      requested: { network: true },
      atproto: { plcUrl: f.network.plcUrl },
    });
    await f.reopen({
      policy: parseOperatorPolicy({
        network: { destinations: [{ host: NAME, ports: [net.port] }], allowRanges: [`${net.gateway}/32`] },
      }),
      egress: { resolvers: [`${net.dns.address}:${net.dns.port}`], outboundNetwork: net.network },
    });
    return code.uri;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const pong = (output: unknown) => (output as { body?: string } | undefined)?.body === 'pong';

const execNet: Bench = {
  name: 'exec.net',
  needs: NEEDS,
  async run(opts): Promise<BenchResult> {
    const { rounds, log } = opts;
    const perRound = sizes(opts, { full: 3, smoke: 1 });
    const f = await openFixture(log);
    let net: NetSide | null = null;
    try {
      net = await openNetSide(f.docker);
      const greet = await runlogOnce(f); // the runtime volume, and the runtime record's URI
      const uri = await grantNetwork(f, net, String(greet.context.resolved.runtimeUri));
      const url = `http://${NAME}:${net.port}/ping`;
      const ours = async (): Promise<{ ms: number; context: Record<string, any> }> => {
        const t0 = nowMs();
        const out = await f.rl.execute({ uri, handler: 'get', input: { url }, callerDid: f.callerDid });
        const ms = nowMs() - t0;
        if (out.status !== 'succeeded' || !pong(out.output))
          throw new Error(
            `exec.net: runlog's execution did not get pong: ${JSON.stringify(out.failure ?? out.output)}`,
          );
        await f.rl.idle();
        return { ms, context: out.view.context as Record<string, any> };
      };
      const first = await ours(); // untimed: the code volume, the proxy's start
      const call: RawCall = {
        handler: 'get',
        input: { url: `http://${net.gateway}:${net.port}/ping` },
        expect: pong,
        network: net.network,
      };
      const raw = rawRoundTrip(
        {
          docker: f.docker,
          home: f.home,
          callerDid: f.callerDid,
          sandboxImage: imageRef('at-run-sandbox'),
          labels: BENCH_LABELS,
        },
        first.context,
        call,
      );
      await raw(); // untimed: the same first use on the raw side
      const { ours: ourRounds, theirs: rawRounds } = await interleavedRounds(
        rounds,
        perRound,
        { ours: async () => (await ours()).ms, theirs: async () => (await raw()).ms },
        (r, o, t) => log(`exec.net round ${r}: runlog ${o.toFixed(0)} ms, raw ${t.toFixed(0)} ms`),
      );
      return sideBySide('exec.net', 'ms', median(ourRounds), median(rawRounds), {
        target: '≤ 1.3',
        runlog: 'rl.execute() of a GET through the egress proxy, warm volumes, its own network per execution',
        raw: 'hardened container round trip on a bridge network, the same GET straight to the server',
      });
    } finally {
      await f.close();
      await net?.close();
    }
  },
};

export const execNetBenches: Bench[] = [execNet];
