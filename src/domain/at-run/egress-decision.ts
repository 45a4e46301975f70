// The egress proxy's decision for one connection, as a pure function of the grant, the destination asked for and
// the addresses the proxy's own resolver gave for it.
//
// Two steps, because the proxy must not even resolve a name the grant does not cover (a lookup of an ungranted
// name would carry data out through the resolver): checkTarget before resolving, decideConnection after. The
// address returned is one of those checked and the proxy connects to it and nothing else, so a second answer from
// DNS (rebinding) never reaches a connection. Every resolved address must pass, not only the one chosen: a name
// that resolves into a forbidden range at all is refused. Imports nothing (docs/decisions/0012) but egress files.
import { classifyAddress, inRange, parseCidr, parseIp, unmapped, type IpRange } from './egress-address.ts';
import type { EgressRefusalCode } from './egress-codes.ts';
import { hostMatches, hostNameIssue, looksLikeIp, normalizeHost } from './egress-host.ts';
import type { NetworkGrant } from './egress-grant.ts';

export interface EgressTarget {
  /** As the request wrote it (CONNECT authority or URL host): case and one trailing dot do not matter. */
  host: string;
  port: number;
}

export interface Refusal {
  allow: false;
  code: EgressRefusalCode;
  reason: string;
}

export type TargetCheck = { allow: true; host: string } | Refusal;
export type ConnectionDecision = { allow: true; host: string; address: string; family: 4 | 6 } | Refusal;

const refuse = (code: EgressRefusalCode, reason: string): Refusal => ({ allow: false, code, reason });

/** Whether the grant covers the destination: a granted name (never an IP address) on one of its granted ports. */
export function checkTarget(grant: Pick<NetworkGrant, 'destinations'>, target: EgressTarget): TargetCheck {
  const host = normalizeHost(target.host);
  if (host.length === 0) return refuse('EGRESS_REQUEST_INVALID', 'the request names no host');
  if (looksLikeIp(host))
    return refuse('EGRESS_DIRECT_IP', `${target.host} is an IP address: only granted host names are reachable`);
  const issue = hostNameIssue(host);
  if (issue) return refuse('EGRESS_HOST_NOT_GRANTED', `${JSON.stringify(target.host)} ${issue}`);
  if (!Number.isSafeInteger(target.port) || target.port < 1 || target.port > 65535)
    return refuse('EGRESS_REQUEST_INVALID', `port ${target.port} is not a TCP port`);
  const matching = grant.destinations.filter((d) => hostMatches(d.host, host));
  if (matching.length === 0) return refuse('EGRESS_HOST_NOT_GRANTED', `${host} is not granted to this execution`);
  if (!matching.some((d) => d.ports.includes(target.port)))
    return refuse(
      'EGRESS_PORT_NOT_GRANTED',
      `${host} is granted on port ${[...new Set(matching.flatMap((d) => d.ports))].join(', ')}, not ${target.port}`,
    );
  return { allow: true, host };
}

/** Why `address` may not be reached under `allowRanges`, or null when it may. */
export function addressRefusal(address: string, allowRanges: readonly IpRange[]): string | null {
  const parsed = parseIp(address);
  const klass = classifyAddress(address);
  if (!parsed || klass.kind === 'invalid') return `${JSON.stringify(address)} is not an IP address`;
  if (klass.kind === 'public') return null;
  const ip = unmapped(parsed);
  if (allowRanges.some((r) => inRange(ip, r))) return null;
  return `${address} is ${klass.kind} (${klass.range ?? 'special'}), not in the policy's allowRanges`;
}

/**
 * Allows the connection to one checked address, or refuses it: the target must pass checkTarget, the resolver must
 * have answered, and every address it gave must be public or inside one of the grant's allowRanges. The first
 * address is chosen (the resolver's order).
 */
export function decideConnection(
  grant: Pick<NetworkGrant, 'destinations' | 'allowRanges'>,
  target: EgressTarget,
  resolved: readonly string[],
): ConnectionDecision {
  const checked = checkTarget(grant, target);
  if (!checked.allow) return checked;
  if (resolved.length === 0) return refuse('EGRESS_RESOLVE_FAILED', `${checked.host} did not resolve to any address`);
  const ranges = grant.allowRanges.map((r) => parseCidr(r)).filter((r): r is IpRange => r !== null);
  for (const address of resolved) {
    const why = addressRefusal(address, ranges);
    if (why) return refuse('EGRESS_ADDRESS_FORBIDDEN', `${checked.host} resolves to ${why}`);
  }
  const address = resolved[0] as string;
  return { allow: true, host: checked.host, address, family: parseIp(address)?.family ?? 4 };
}
