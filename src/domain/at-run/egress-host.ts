// Host names and host patterns for egress: what a policy destination, a code record's host and a proxy request may
// name, and whether a pattern covers a name.
//
// A pattern is a host name, or `*.` and a suffix of at least two labels: the star stands for one or more labels, so
// `*.example.com` covers `api.example.com` and `a.b.example.com` but never `example.com` itself (list that too to
// allow it). Names compare lower-cased, with one trailing dot dropped only where a request names them (a policy or
// a record writes names without it). A name whose last label is a number is an IPv4 address to a URL parser
// (`0x7f.1`, `2130706433`): such a name is never a host name here, so it cannot slip past the direct-IP rule.
// Imports nothing (docs/decisions/0012) but the other egress files.
import { isIpLiteral } from './egress-address.ts';

export const MAX_HOST_LENGTH = 253;
const LABEL_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/** A last label a URL parser reads as a number (decimal, or 0x hex): the name is an IPv4 address then. */
const NUMERIC_LABEL_RE = /^(?:[0-9]+|0x[0-9a-f]*)$/;

/** A name as a request writes it, for comparison: lower case, one trailing dot dropped. */
export function normalizeHost(text: string): string {
  const lower = text.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** Whether a name (normalized) is an IP address in any form a URL parser would take: literal or numeric. */
export function looksLikeIp(host: string): boolean {
  if (isIpLiteral(host)) return true;
  const last = host.split('.').at(-1) ?? '';
  return NUMERIC_LABEL_RE.test(last);
}

/** Why `text` is not a host name (lower-case letters, digits and hyphens in dotted labels), or null when it is. */
export function hostNameIssue(text: string): string | null {
  if (text.length === 0 || text.length > MAX_HOST_LENGTH) return `must be 1 to ${MAX_HOST_LENGTH} characters`;
  if (looksLikeIp(text)) return 'is an IP address, not a host name';
  for (const label of text.split('.'))
    if (!LABEL_RE.test(label))
      return `has a label ${JSON.stringify(label)} that is not lower-case letters, digits or -`;
  return null;
}

/** Why `text` is not a host pattern (a host name, or `*.` and a suffix of two labels or more), or null. */
export function hostPatternIssue(text: string): string | null {
  if (!text.startsWith('*.')) return hostNameIssue(text);
  const suffix = text.slice(2);
  if (suffix.includes('*')) return 'may hold one * only, as its first label';
  const issue = hostNameIssue(suffix);
  if (issue) return issue;
  return suffix.includes('.') ? null : 'must name at least two labels after *. (a whole top-level domain is too wide)';
}

export const isWildcard = (pattern: string): boolean => pattern.startsWith('*.');

/** Whether `pattern` covers the (normalized) name `host`: equal, or a wildcard whose suffix it ends with. */
export function hostMatches(pattern: string, host: string): boolean {
  if (!isWildcard(pattern)) return pattern === host;
  const suffix = pattern.slice(1);
  return host.length > suffix.length && host.endsWith(suffix);
}

/**
 * The narrowest pattern both cover, or null when no name matches both: two names must be equal, a wildcard and a
 * name give the name it covers, and two wildcards give the narrower when one covers the other.
 */
export function intersectPatterns(a: string, b: string): string | null {
  if (!isWildcard(a) && !isWildcard(b)) return a === b ? a : null;
  if (!isWildcard(a)) return hostMatches(b, a) ? a : null;
  if (!isWildcard(b)) return hostMatches(a, b) ? b : null;
  if (a === b) return a;
  if (hostMatches(a, b.slice(2))) return b;
  if (hostMatches(b, a.slice(2))) return a;
  return null;
}

/** `host` or `host:port` (a pattern allowed), split; null when the port is not 1–65535 without leading zeros. */
export function splitHostPort(text: string): { host: string; port?: number } | null {
  const colon = text.lastIndexOf(':');
  if (colon === -1) return { host: text };
  const port = text.slice(colon + 1);
  if (!/^[1-9][0-9]{0,4}$/.test(port) || Number(port) > 65535) return null;
  return { host: text.slice(0, colon), port: Number(port) };
}

/** A TCP port: an integer 1–65535. */
export const isPort = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 && v <= 65535;
