// The egress proxy as one object: its control API listening, its grants and their listeners, its report ring.
// main.ts runs it from the command line; tests start it in their own process on loopback.
import type { AddressInfo } from 'node:net';
import type { ProxyConfig } from './config.ts';
import { createControlServer } from './control-api.ts';
import { createGrantRegistry, type GrantRegistry } from './grant-registry.ts';
import { createReportLog, type ReportLog } from './reports.ts';
import { createResolve } from './resolver.ts';

export interface EgressProxy {
  /** Where the control API listens (its port resolved when 0 was asked). */
  control: { host: string; port: number };
  registry: GrantRegistry;
  reports: ReportLog;
  /** Cuts every connection, closes every listener and answers waiting report readers. */
  close(): Promise<void>;
}

export async function startEgressProxy(config: ProxyConfig): Promise<EgressProxy> {
  const reports = createReportLog(config.maxReports);
  const registry = createGrantRegistry({
    reports,
    resolve: createResolve(config.resolvers, config.resolveTimeoutMs),
    ports: { proxy: config.proxyPort, dns: config.dnsPort },
    connectTimeoutMs: config.connectTimeoutMs,
    maxReportsPerGrant: config.maxReportsPerGrant,
  });
  const server = createControlServer({ registry, reports, token: config.token });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: config.control.host, port: config.control.port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  return {
    control: { host: config.control.host, port: bound.port },
    registry,
    reports,
    async close() {
      reports.close();
      await registry.closeAll();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
