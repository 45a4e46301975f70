// The resolvers an egress proxy asks by default: the host's own, from /etc/resolv.conf, loopback ones left out (the
// proxy runs in a container, where the host's loopback is not reachable). An operator sets its own with
// `executions.egress.resolvers`.
import { readFileSync } from 'node:fs';

/** The nameservers of a resolv.conf text that a container can reach (not loopback). */
export function resolversOf(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+([0-9.]+)\s*$/.exec(line);
    if (m && !m[1]!.startsWith('127.')) out.push(m[1]!);
  }
  return out;
}

/** The host's resolvers, or none when /etc/resolv.conf cannot be read. */
export function hostResolvers(path = '/etc/resolv.conf'): string[] {
  try {
    return resolversOf(readFileSync(path, 'utf8'));
  } catch {
    return [];
  }
}
