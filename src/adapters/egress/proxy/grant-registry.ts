// The grants the proxy holds: one per execution, under the supervisor's key, each bound to its own address.
//
// A key and an address each hold one grant at a time: registering either twice is a conflict, never a silent
// replacement (a replaced grant would leave the old execution's connections under the new one's limits). Removing
// a grant cuts its connections, closes its listeners and returns what it used.
import { parseIp } from '../../../domain/at-run/egress-address.ts';
import type { EgressControlCode } from '../../../domain/at-run/egress-codes.ts';
import type { NetworkGrant } from '../../../domain/at-run/egress-grant.ts';
import { startGrantListener, type GrantListener } from './grant-listener.ts';
import { createGrantState, type GrantState, type Usage } from './grant-state.ts';
import type { ReportLog } from './reports.ts';
import type { Resolve } from './resolver.ts';

/** An error the control API answers with its code. */
export class ControlError extends Error {
  code: EgressControlCode;
  constructor(code: EgressControlCode, message: string) {
    super(message);
    this.code = code;
  }
}

export interface RegisteredGrant {
  key: string;
  address: string;
  proxyPort: number;
  dnsPort: number;
}

export interface GrantRegistry {
  put(key: string, address: string, grant: NetworkGrant): Promise<RegisteredGrant>;
  remove(key: string): Promise<{ key: string; address: string; usage: Usage }>;
  list(): { key: string; address: string; usage: Usage }[];
  closeAll(): Promise<void>;
}

interface Entry {
  state: GrantState;
  listener: GrantListener | null;
}

export interface RegistryOptions {
  reports: ReportLog;
  resolve: Resolve;
  ports: { proxy: number; dns: number };
  connectTimeoutMs: number;
  maxReportsPerGrant: number;
}

export function createGrantRegistry(opts: RegistryOptions): GrantRegistry {
  const byKey = new Map<string, Entry>();

  async function remove(key: string) {
    const entry = byKey.get(key);
    if (!entry) throw new ControlError('EGRESS_GRANT_UNKNOWN', `no grant under ${key}`);
    byKey.delete(key);
    const usage = entry.state.stop('the grant was removed');
    await entry.listener?.close();
    return { key, address: entry.state.address, usage };
  }

  return {
    async put(key, address, grant) {
      const ip = parseIp(address);
      if (!ip || address.includes('%') || address.startsWith('['))
        throw new ControlError('EGRESS_GRANT_INVALID', `address ${JSON.stringify(address)} is not an IP address`);
      if (byKey.has(key)) throw new ControlError('EGRESS_GRANT_EXISTS', `a grant is registered under ${key}`);
      for (const [other, e] of byKey)
        if (e.state.address === address)
          throw new ControlError('EGRESS_GRANT_EXISTS', `${address} holds the grant of ${other}`);
      const state = createGrantState({
        key,
        address,
        grant,
        reports: opts.reports,
        maxReports: opts.maxReportsPerGrant,
      });
      const entry: Entry = { state, listener: null };
      byKey.set(key, entry);
      try {
        entry.listener = await startGrantListener(
          { state, resolve: opts.resolve, connectTimeoutMs: opts.connectTimeoutMs },
          opts.ports,
        );
      } catch (err) {
        byKey.delete(key);
        state.stop('its listeners did not start');
        throw new ControlError(
          'EGRESS_LISTEN_FAILED',
          `cannot listen on ${address}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
        );
      }
      return { key, address, proxyPort: entry.listener.proxyPort, dnsPort: entry.listener.dnsPort };
    },
    remove,
    list: () => [...byKey].map(([key, e]) => ({ key, address: e.state.address, usage: { ...e.state.usage } })),
    async closeAll() {
      await Promise.all([...byKey.keys()].map((key) => remove(key).catch(() => undefined)));
    },
  };
}
