// The operator policy's `network` section: where executions may connect, which forbidden ranges the operator opens
// anyway, and each execution's limits. A grant (egress-grant.ts) has the same shape, narrowed to one execution.
//
//   "network": {
//     "destinations": [{ "host": "api.example.com", "ports": [443] }, { "host": "*.example.org", "ports": [443, 80] }],
//     "allowRanges": ["10.1.2.0/24"],          forbidden ranges (loopback, private, link-local, metadata…) a granted
//                                              name may still resolve into; public addresses need no entry
//     "limits": { "bytes": 16777216, "seconds": 60, "connections": 8 }
//   }
//
// No destinations (the default) means no network: a code record asking for it is refused (NETWORK_NOT_ALLOWED), as
// before the proxy existed. Validation is strict like the rest of the policy: unknown keys, duplicate hosts, ranges
// with host bits set and ranges wider than /8 are errors. Imports nothing (docs/decisions/0012) but the egress files.
import { parseCidr, unmapped } from './egress-address.ts';
import { hostPatternIssue, isPort } from './egress-host.ts';

export interface EgressDestination {
  /** A host name or `*.suffix` pattern, lower case. */
  host: string;
  /** Distinct TCP ports, ascending. */
  ports: number[];
}

/** One execution's network budget; over any of them the proxy cuts or refuses, and reports it. */
export interface EgressLimits {
  /** Bytes both ways over all its connections. */
  bytes: number;
  /** Wall time from the grant's registration. */
  seconds: number;
  /** Connections open at once. */
  connections: number;
}

export interface NetworkPolicy {
  destinations: EgressDestination[];
  /** CIDR ranges, host bits clear: addresses in them are reachable even though their range is forbidden. */
  allowRanges: string[];
  limits: EgressLimits;
}

export const DEFAULT_EGRESS_LIMITS: Readonly<EgressLimits> = Object.freeze({
  bytes: 16 * 1024 * 1024,
  seconds: 60,
  connections: 8,
});

/** Upper bounds on the limits: past these a limit would be no bound at all. */
export const MAX_EGRESS_LIMITS: Readonly<EgressLimits> = Object.freeze({
  bytes: 64 * 1024 * 1024 * 1024,
  seconds: 7 * 24 * 3600,
  connections: 1024,
});

export const EGRESS_LIST_LIMITS = Object.freeze({ destinations: 256, ports: 64, allowRanges: 64 });

/** No destinations: no execution gets network. */
export const DEFAULT_NETWORK_POLICY: Readonly<NetworkPolicy> = Object.freeze({
  destinations: [],
  allowRanges: [],
  limits: { ...DEFAULT_EGRESS_LIMITS },
});

const MIN_PREFIX = { 4: 8, 6: 7 } as const;
const LIMIT_KEYS = ['bytes', 'seconds', 'connections'] as const;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function unknownKeys(issues: string[], where: string, obj: Record<string, unknown>, known: readonly string[]): void {
  for (const k of Object.keys(obj)) if (!known.includes(k)) issues.push(`${where}.${k} is not a known setting`);
}

function parseDestination(issues: string[], where: string, v: unknown): EgressDestination | null {
  if (!isObject(v)) {
    issues.push(`${where} must be an object { host, ports }`);
    return null;
  }
  unknownKeys(issues, where, v, ['host', 'ports']);
  const before = issues.length;
  const hostIssue = typeof v.host === 'string' ? hostPatternIssue(v.host) : 'must be a string';
  if (hostIssue) issues.push(`${where}.host ${JSON.stringify(v.host)} ${hostIssue}`);
  const ports = v.ports;
  if (!Array.isArray(ports) || ports.length === 0 || ports.length > EGRESS_LIST_LIMITS.ports)
    issues.push(`${where}.ports must be a non-empty array of at most ${EGRESS_LIST_LIMITS.ports} ports`);
  else
    ports.forEach((p, i) => {
      if (!isPort(p)) issues.push(`${where}.ports[${i}] must be an integer from 1 to 65535 (got ${JSON.stringify(p)})`);
      else if (ports.indexOf(p) !== i) issues.push(`${where}.ports[${i}] ${p} is listed twice`);
    });
  if (issues.length > before) return null;
  return { host: v.host as string, ports: [...(ports as number[])].sort((a, b) => a - b) };
}

function parseDestinations(issues: string[], v: unknown): EgressDestination[] {
  if (!Array.isArray(v) || v.length > EGRESS_LIST_LIMITS.destinations) {
    issues.push(`network.destinations must be an array of at most ${EGRESS_LIST_LIMITS.destinations} { host, ports }`);
    return [];
  }
  const out: EgressDestination[] = [];
  v.forEach((d, i) => {
    const dest = parseDestination(issues, `network.destinations[${i}]`, d);
    if (!dest) return;
    if (out.some((o) => o.host === dest.host))
      issues.push(`network.destinations[${i}].host ${dest.host} is listed twice (list its ports once)`);
    else out.push(dest);
  });
  return out;
}

function parseAllowRanges(issues: string[], v: unknown): string[] {
  if (!Array.isArray(v) || v.length > EGRESS_LIST_LIMITS.allowRanges) {
    issues.push(`network.allowRanges must be an array of at most ${EGRESS_LIST_LIMITS.allowRanges} CIDR ranges`);
    return [];
  }
  const out: string[] = [];
  v.forEach((r, i) => {
    const where = `network.allowRanges[${i}] ${JSON.stringify(r)}`;
    const range = typeof r === 'string' ? parseCidr(r) : null;
    if (!range) issues.push(`${where} is not a CIDR range with its host bits clear (10.1.2.0/24, fd00:1::/64)`);
    else if (range.prefix < MIN_PREFIX[range.family])
      issues.push(`${where} is wider than /${MIN_PREFIX[range.family]}: name the ranges you mean`);
    else if (range.family === 6 && unmapped(range).family === 4 && range.prefix >= 96)
      issues.push(`${where} is IPv4-mapped: write the IPv4 range`);
    else out.push(r as string);
  });
  return out;
}

function parseLimits(issues: string[], v: unknown, d: EgressLimits): EgressLimits {
  if (!isObject(v)) {
    issues.push('network.limits must be an object { bytes, seconds, connections }');
    return { ...d };
  }
  unknownKeys(issues, 'network.limits', v, LIMIT_KEYS);
  const limits = { ...d, ...(v as Partial<EgressLimits>) };
  for (const k of LIMIT_KEYS) {
    const n = limits[k];
    if (!(typeof n === 'number' && Number.isSafeInteger(n) && n >= 1 && n <= MAX_EGRESS_LIMITS[k]))
      issues.push(
        `network.limits.${k} must be an integer from 1 to ${MAX_EGRESS_LIMITS[k]} (got ${JSON.stringify(n)})`,
      );
  }
  return limits;
}

/**
 * The `network` section over `d` (DEFAULT_NETWORK_POLICY unless told), every problem pushed onto `issues` (its
 * paths start with `network.`). Omitted keys take `d`'s values.
 */
export function parseNetworkPolicy(
  issues: string[],
  v: unknown,
  d: Readonly<NetworkPolicy> = DEFAULT_NETWORK_POLICY,
): NetworkPolicy {
  const fallback = {
    destinations: d.destinations.map((x) => ({ ...x, ports: [...x.ports] })),
    allowRanges: [...d.allowRanges],
    limits: { ...d.limits },
  };
  if (!isObject(v)) {
    issues.push('network must be an object { destinations, allowRanges, limits }');
    return fallback;
  }
  unknownKeys(issues, 'network', v, ['destinations', 'allowRanges', 'limits']);
  return {
    destinations: v.destinations === undefined ? fallback.destinations : parseDestinations(issues, v.destinations),
    allowRanges: v.allowRanges === undefined ? fallback.allowRanges : parseAllowRanges(issues, v.allowRanges),
    limits: v.limits === undefined ? fallback.limits : parseLimits(issues, v.limits, d.limits),
  };
}
