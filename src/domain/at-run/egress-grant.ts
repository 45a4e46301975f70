// What one execution may reach: the intersection of the operator's destinations with the hosts its code record
// names, with the operator's allowRanges and limits. The supervisor computes it at admission (policy-admission.ts)
// and registers it with the egress proxy, which reads it back with parseGrant.
//
// A record's `requested.hosts` entry is a host or a pattern, with or without a port. Against each policy destination
// the host part narrows to what both cover (egress-host.ts intersectPatterns) and the port to the destination's
// ports (all of them when the entry names none). `network: true` without hosts asks for every policy destination.
// Imports nothing (docs/decisions/0012) but the other egress files.
import { hostPatternIssue, intersectPatterns, splitHostPort } from './egress-host.ts';
import { parseNetworkPolicy, type EgressDestination, type NetworkPolicy } from './egress-policy.ts';

/** A NetworkPolicy narrowed to one execution; its destinations are never empty. */
export type NetworkGrant = NetworkPolicy;

export type GrantOutcome =
  | { ok: true; grant: NetworkGrant }
  | { ok: false; code: 'NETWORK_NOT_ALLOWED' | 'NETWORK_GRANT_EMPTY'; message: string; issues: string[] };

/** Adds `ports` to `host`'s entry in `out` (created when missing), keeping the ports distinct and ascending. */
function merge(out: EgressDestination[], host: string, ports: readonly number[]): void {
  const entry = out.find((d) => d.host === host);
  if (!entry) out.push({ host, ports: [...ports].sort((a, b) => a - b) });
  else entry.ports = [...new Set([...entry.ports, ...ports])].sort((a, b) => a - b);
}

/** Adds what `asked` and each policy destination both cover to `out`; whether anything was. */
function narrow(
  out: EgressDestination[],
  policy: readonly EgressDestination[],
  asked: { host: string; port?: number },
): boolean {
  let granted = false;
  for (const d of policy) {
    const host = intersectPatterns(d.host, asked.host);
    const ports = asked.port === undefined ? d.ports : d.ports.filter((p) => p === asked.port);
    if (host === null || ports.length === 0) continue;
    merge(out, host, ports);
    granted = true;
  }
  return granted;
}

/**
 * The grant for a code record that asks for network, naming `hosts` (or not). Refused with NETWORK_NOT_ALLOWED when
 * the policy lists no destination, and with NETWORK_GRANT_EMPTY when none of the hosts meets one. Hosts are
 * expected valid (code-record.ts checks them); an entry that is not (`*.com`) is granted nothing.
 */
export function grantNetwork(policy: Readonly<NetworkPolicy>, hosts?: readonly string[]): GrantOutcome {
  if (policy.destinations.length === 0)
    return {
      ok: false,
      code: 'NETWORK_NOT_ALLOWED',
      message: "the code record requests network access; this runner's policy grants no network destinations",
      issues: ['network: true was requested'],
    };
  const destinations: EgressDestination[] = [];
  if (hosts === undefined) for (const d of policy.destinations) merge(destinations, d.host, d.ports);
  const missed: string[] = [];
  for (const entry of hosts ?? []) {
    const asked = splitHostPort(entry.toLowerCase());
    if (!asked || hostPatternIssue(asked.host) !== null || !narrow(destinations, policy.destinations, asked))
      missed.push(`${entry} is not among this runner's network destinations`);
  }
  if (destinations.length === 0)
    return {
      ok: false,
      code: 'NETWORK_GRANT_EMPTY',
      message: "none of the hosts the code record names is among this runner's network destinations",
      issues: missed,
    };
  return {
    ok: true,
    grant: { destinations, allowRanges: [...policy.allowRanges], limits: { ...policy.limits } },
  };
}

/**
 * A grant as the proxy's control API receives it: the policy's shape and rules, every key required, at least one
 * destination. Returns the grant, or the issues.
 */
export function parseGrant(value: unknown): { grant: NetworkGrant } | { issues: string[] } {
  const issues: string[] = [];
  const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
  if (!isObject) return { issues: ['a grant must be an object { destinations, allowRanges, limits }'] };
  for (const k of ['destinations', 'allowRanges', 'limits'])
    if ((value as Record<string, unknown>)[k] === undefined) issues.push(`network.${k} is required`);
  const grant = parseNetworkPolicy(issues, value);
  if (issues.length === 0 && grant.destinations.length === 0) issues.push('network.destinations must not be empty');
  return issues.length > 0 ? { issues } : { grant };
}
