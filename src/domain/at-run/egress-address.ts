// IP addresses for the egress proxy: parsing IPv4 and IPv6 literals by hand, CIDR ranges, and which special range
// an address falls in (classifyAddress).
//
// The proxy runs this file under plain Node with no dependencies (docs/decisions/0012), so it imports nothing, not
// even node:net: the parsing is strict on purpose (no leading zeros, no shortened IPv4, no octal or hex parts), since
// an address that two parsers read differently is how a check and a connection come to disagree. The special ranges
// follow the IANA special-purpose registries; anything outside 2000::/3 in IPv6 is unallocated and counted reserved.

/** What an address is, as far as egress is concerned: only `public` is reachable without an explicit allowRange. */
export type AddressKind =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'shared'
  | 'link-local'
  | 'metadata'
  | 'unique-local'
  | 'multicast'
  | 'broadcast'
  | 'documentation'
  | 'benchmark'
  | 'tunnel'
  | 'reserved'
  | 'invalid';

/** An address as a number: 32 bits for IPv4, 128 for IPv6. */
export interface IpValue {
  family: 4 | 6;
  value: bigint;
}

/** A CIDR range; `value` has its host bits clear. */
export interface IpRange extends IpValue {
  prefix: number;
}

export interface AddressClass {
  kind: AddressKind;
  /** The family the address was classified as: an IPv4-mapped IPv6 address is classified as its IPv4 address. */
  family: 4 | 6;
  /** The range it matched (`10.0.0.0/8`), absent for `public` and `invalid`. */
  range?: string;
}

const DEC_OCTET = /^(?:0|[1-9][0-9]{0,2})$/;
const HEXTET = /^[0-9a-fA-F]{1,4}$/;

/** A strict dotted-quad IPv4 address (four decimal parts, 0–255, no leading zeros), or null. */
export function parseIpv4(text: string): IpValue | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let value = 0n;
  for (const p of parts) {
    if (!DEC_OCTET.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    value = (value << 8n) | BigInt(n);
  }
  return { family: 4, value };
}

/** The hextets of one side of `::` (an IPv4 tail counts as two), or null. */
function hextets(side: string, allowV4Tail: boolean): number[] | null {
  if (side === '') return [];
  const parts = side.split(':');
  const out: number[] = [];
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i] as string;
    if (allowV4Tail && i === parts.length - 1 && p.includes('.')) {
      const v4 = parseIpv4(p);
      if (!v4) return null;
      out.push(Number(v4.value >> 16n), Number(v4.value & 0xffffn));
    } else if (HEXTET.test(p)) out.push(parseInt(p, 16));
    else return null;
  }
  return out;
}

/** An IPv6 address (with `::`, an IPv4 tail, and an optional `%zone`, which is ignored), or null. */
export function parseIpv6(text: string): IpValue | null {
  const zone = text.indexOf('%');
  const body = zone === -1 ? text : text.slice(0, zone);
  if (zone !== -1 && !/^%[A-Za-z0-9_.-]{1,64}$/.test(text.slice(zone))) return null;
  const halves = body.split('::');
  if (halves.length > 2) return null;
  let words: number[];
  if (halves.length === 2) {
    const head = hextets(halves[0] as string, false);
    const tail = hextets(halves[1] as string, true);
    if (!head || !tail || head.length + tail.length > 7) return null;
    words = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  } else {
    const all = hextets(body, true);
    if (!all || all.length !== 8) return null;
    words = all;
  }
  let value = 0n;
  for (const w of words) value = (value << 16n) | BigInt(w);
  return { family: 6, value };
}

/** An IPv4 or IPv6 literal (IPv6 optionally in brackets), or null. */
export function parseIp(text: string): IpValue | null {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  return bare.includes(':') ? parseIpv6(bare) : parseIpv4(bare);
}

const bits = (family: 4 | 6): number => (family === 4 ? 32 : 128);

/** `a.b.c.d/n` or `x::/n`, with its host bits clear; null when malformed (host bits set included). */
export function parseCidr(text: string): IpRange | null {
  const slash = text.indexOf('/');
  if (slash === -1) return null;
  const ip = text.slice(0, slash).includes(':') ? parseIpv6(text.slice(0, slash)) : parseIpv4(text.slice(0, slash));
  const p = text.slice(slash + 1);
  if (!ip || text.includes('%') || !/^(?:0|[1-9][0-9]{0,2})$/.test(p)) return null;
  const prefix = Number(p);
  if (prefix > bits(ip.family)) return null;
  const host = bits(ip.family) - prefix;
  if ((ip.value & ((1n << BigInt(host)) - 1n)) !== 0n) return null;
  return { ...ip, prefix };
}

/** Whether `ip` lies in `range` (families must match: compare an IPv4-mapped address through `unmapped`). */
export function inRange(ip: IpValue, range: IpRange): boolean {
  if (ip.family !== range.family) return false;
  const shift = BigInt(bits(ip.family) - range.prefix);
  return ip.value >> shift === range.value >> shift;
}

const MAPPED = parseCidr('::ffff:0:0/96') as IpRange;

/** An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as its IPv4 address; any other address unchanged. */
export function unmapped(ip: IpValue): IpValue {
  return inRange(ip, MAPPED) ? { family: 4, value: ip.value & 0xffffffffn } : ip;
}

/** An address's text in canonical form (dotted quad; IPv6 in RFC 5952 shortest form). */
export function formatIp(ip: IpValue): string {
  if (ip.family === 4) return [24n, 16n, 8n, 0n].map((s) => String((ip.value >> s) & 0xffn)).join('.');
  const words = Array.from({ length: 8 }, (_, i) => Number((ip.value >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = words.map((w) => w.toString(16));
  if (best === -1) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** The special ranges, most specific first: the first match wins. */
const SPECIAL: readonly (readonly [string, AddressKind])[] = [
  // IPv4
  ['169.254.169.254/32', 'metadata'], // AWS, GCP, Azure, OpenStack instance metadata
  ['169.254.170.2/32', 'metadata'], // AWS ECS task metadata
  ['100.100.100.200/32', 'metadata'], // Alibaba Cloud metadata
  ['168.63.129.16/32', 'metadata'], // Azure WireServer: a public address that answers only inside Azure
  ['192.0.0.192/32', 'metadata'], // Oracle Cloud metadata (in 192.0.0.0/24 too)
  ['255.255.255.255/32', 'broadcast'],
  ['0.0.0.0/8', 'unspecified'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'shared'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'],
  ['192.0.2.0/24', 'documentation'],
  ['192.88.99.0/24', 'tunnel'], // 6to4 relay anycast
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'benchmark'],
  ['198.51.100.0/24', 'documentation'],
  ['203.0.113.0/24', 'documentation'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
  // IPv6 (an IPv4-mapped address never reaches this list: it is classified as its IPv4 address)
  ['fd00:ec2::254/128', 'metadata'], // AWS instance metadata over IPv6
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['::/96', 'reserved'], // IPv4-compatible, deprecated
  ['::ffff:0:0:0/96', 'reserved'], // IPv4-translated (SIIT)
  ['64:ff9b:1::/48', 'private'], // local-use IPv4/IPv6 translation
  ['100::/64', 'reserved'], // discard-only
  ['2001::/32', 'tunnel'], // Teredo
  ['2001:2::/48', 'benchmark'],
  ['2001:db8::/32', 'documentation'],
  ['2001::/23', 'reserved'], // IETF protocol assignments
  ['2002::/16', 'tunnel'], // 6to4
  ['3fff::/20', 'documentation'],
  ['5f00::/16', 'reserved'], // SRv6 SIDs
  ['fc00::/7', 'unique-local'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'reserved'], // site-local, deprecated
  ['ff00::/8', 'multicast'],
];
const SPECIAL_RANGES = SPECIAL.map(([cidr, kind]) => ({ cidr, kind, range: parseCidr(cidr) as IpRange }));
const NAT64 = parseCidr('64:ff9b::/96') as IpRange;
const GLOBAL_UNICAST = parseCidr('2000::/3') as IpRange;

/**
 * Which range an address is in. An IPv4-mapped IPv6 address is its IPv4 address, and a NAT64 address
 * (64:ff9b::/96) is the IPv4 address it embeds, since that is what a connection to it reaches. IPv6 outside
 * 2000::/3 and the ranges above is unallocated: `reserved`. Not an address: `invalid`.
 */
export function classifyAddress(text: string): AddressClass {
  const parsed = parseIp(text);
  if (!parsed) return { kind: 'invalid', family: text.includes(':') ? 6 : 4 };
  const ip = unmapped(parsed);
  if (inRange(ip, NAT64)) {
    const embedded = classifyValue({ family: 4, value: ip.value & 0xffffffffn });
    return embedded.kind === 'public' ? { kind: 'public', family: 6 } : { ...embedded, family: 6 };
  }
  return classifyValue(ip);
}

function classifyValue(ip: IpValue): AddressClass {
  for (const s of SPECIAL_RANGES) if (inRange(ip, s.range)) return { kind: s.kind, family: ip.family, range: s.cidr };
  if (ip.family === 6 && !inRange(ip, GLOBAL_UNICAST))
    return { kind: 'reserved', family: 6, range: 'outside 2000::/3' };
  return { kind: 'public', family: ip.family };
}

/** Whether `text` is an IP literal of either family (brackets allowed around IPv6). */
export function isIpLiteral(text: string): boolean {
  return parseIp(text) !== null;
}
