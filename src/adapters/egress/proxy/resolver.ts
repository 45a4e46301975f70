// Name resolution for the proxy: the configured resolver only (never the system's), A and AAAA asked together, and
// every address either answer gives returned, so the decision checks them all (egress-decision.ts).
//
// Nothing is cached: each connection resolves afresh and connects to an address of that one answer, so an answer
// that changes between two connections (rebinding) is checked again rather than trusted from before.
import { Resolver } from 'node:dns/promises';

export type Resolve = (host: string) => Promise<{ addresses: string[]; error?: string }>;

/** A resolver asking `servers` (`ip`, `ip:port`, `[ipv6]:port`) with a total time of `timeoutMs` per attempt. */
export function createResolve(servers: readonly string[], timeoutMs: number): Resolve {
  const resolver = new Resolver({ timeout: timeoutMs, tries: 2 });
  resolver.setServers([...servers]);
  return async (host) => {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const addresses = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
    if (addresses.length > 0) return { addresses };
    const failure = [v4, v6].find((r): r is PromiseRejectedResult => r.status === 'rejected');
    const code = (failure?.reason as { code?: string } | undefined)?.code;
    return { addresses, error: code ?? 'no address' };
  };
}
