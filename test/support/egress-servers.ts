// The servers a network-granted execution may reach in a test, all the test's own.
//
// An outbound bridge network the test makes (the egress proxy's way out), an HTTP server on its gateway that
// answers `/hello` and a `/big` download, and a DNS server beside it. `api.test` and `other.test` resolve to the
// gateway; `rebind.test` does on its odd-numbered queries and answers the metadata address on the even ones (a
// rebinding, once per pair of lookups, so that each execution of a test meets it afresh). Nothing here sends a
// packet anywhere else.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { publishCode } from '../../src/supervisor/executions/publishing.ts';
import { startDnsTestServer, type DnsTestServer } from './dns-test-server.ts';
import { docker, TEST_LABELS } from './docker.ts';
import { publishNodeRuntime, type TestPds } from './pds.ts';

export interface EgressServers {
  /** The outbound network's name: the proxy's way out (createRunlog's `egress.outboundNetwork`). */
  outbound: string;
  /** Its gateway's address, where both servers listen. */
  gateway: string;
  /** The HTTP server's port. */
  port: number;
  /** Every request the HTTP server answered, as `host url`. */
  served: string[];
  dns: DnsTestServer;
  /** The proxy's resolver, as createRunlog's `egress.resolvers` takes it. */
  resolver: string;
  close(): Promise<void>;
}

/**
 * Starts the servers on a new outbound network named after `tag` and labelled with `labels`; `bigBytes` is the size
 * of `/big`.
 */
export async function startEgressServers(
  tag: string,
  bigBytes: number,
  labels: Readonly<Record<string, string>> = TEST_LABELS,
): Promise<EgressServers> {
  const outbound = `runlog-test-egress-${tag}-${process.pid}`;
  await docker.createNetwork({ Name: outbound, Driver: 'bridge', Labels: { ...labels } });
  const info = (await docker.getNetwork(outbound).inspect()) as { IPAM: { Config: { Gateway: string }[] } };
  const gateway = info.IPAM.Config[0]!.Gateway;
  const served: string[] = [];
  const server: Server = createServer((req, res) => {
    served.push(`${req.headers.host} ${req.url}`);
    if (req.url === '/big') res.end(Buffer.alloc(bigBytes, 0x61));
    else res.end('hello');
  });
  await new Promise<void>((r) => server.listen(0, gateway, r));
  const port = (server.address() as { port: number }).port;
  const answers = (name: string, nth: number): string[] =>
    name === 'api.test' || name === 'other.test'
      ? [gateway]
      : name === 'rebind.test'
        ? nth % 2 === 1
          ? [gateway]
          : ['169.254.169.254']
        : [];
  const dns = await startDnsTestServer(answers, gateway);
  return {
    outbound,
    gateway,
    port,
    served,
    dns,
    resolver: `${dns.address}:${dns.port}`,
    async close() {
      await dns.close();
      await new Promise((r) => server.close(r));
      await docker
        .getNetwork(outbound)
        .remove()
        .catch(() => undefined);
    },
  };
}

/**
 * Publishes `handler` (an ES module's source) as code that asks for network, by a new account `handle`, on a Node
 * runtime published by `runtimes.test`. Returns the code's URI and the runtime's.
 */
export async function publishNetworkCode(
  pds: TestPds,
  root: string,
  handle: string,
  handler: string,
): Promise<{ uri: string; runtimeUri: string }> {
  const dir = mkdtempSync(join(root, 'code-'));
  writeFileSync(join(dir, 'index.mjs'), handler);
  const author = await pds.createAccount(handle);
  const runtimeUri = await publishNodeRuntime(pds, 'runtimes.test');
  const { uri } = await publishCode(author.publisher, {
    dir,
    runtime: runtimeUri,
    entrypoint: 'index.mjs',
    requested: { network: true },
    atproto: { plcUrl: pds.plcUrl },
  });
  return { uri, runtimeUri };
}
