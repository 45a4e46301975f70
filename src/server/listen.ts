// `--listen` addresses: the API is for this machine only, so only loopback is accepted (127.0.0.0/8 or ::1).
// `localhost` is taken as 127.0.0.1 without asking a resolver (the API already accepts `Host: localhost`); other
// names are refused: what they resolve to is not ours to trust.
import { isIPv4, isIPv6 } from 'node:net';
import { UsageError } from '../domain/errors.ts';

export interface ListenAddress {
  host: string;
  port: number;
}

export const DEFAULT_LISTEN: ListenAddress = { host: '127.0.0.1', port: 7420 };

export function isLoopbackAddress(host: string): boolean {
  if (isIPv4(host)) return host.split('.')[0] === '127';
  if (isIPv6(host)) return expandIPv6(host) === '0000:0000:0000:0000:0000:0000:0000:0001';
  return false;
}

function expandIPv6(ip: string): string {
  const [head = '', tail] = ip.toLowerCase().split('::');
  const a = head ? head.split(':') : [];
  const b = tail ? tail.split(':') : [];
  const groups = tail === undefined ? a : [...a, ...Array(8 - a.length - b.length).fill('0'), ...b];
  return groups.map((g) => g.padStart(4, '0')).join(':');
}

/**
 * Parses "127.0.0.1:8080", "[::1]:8080", "localhost:8080" (→ 127.0.0.1) or a bare port ("8080" → 127.0.0.1:8080). Loopback only, unless
 * `anyAddress` (the metrics listener: read-only, no ids, for a scraper on another machine).
 */
export function parseListen(
  value: string | undefined,
  opts: { flag?: string; anyAddress?: boolean } = {},
): ListenAddress {
  if (value === undefined) return DEFAULT_LISTEN;
  const flag = opts.flag ?? '--listen';
  const v = value.trim();
  let host: string;
  let portText: string;
  const bracketed = /^\[([^\]]+)\]:(\d+)$/.exec(v);
  if (/^\d+$/.test(v)) {
    host = DEFAULT_LISTEN.host;
    portText = v;
  } else if (bracketed) {
    host = bracketed[1]!;
    portText = bracketed[2]!;
  } else {
    const i = v.lastIndexOf(':');
    if (i <= 0 || v.indexOf(':') !== i) {
      throw new UsageError(`${flag} '${value}' is not <address>:<port> (e.g. 127.0.0.1:7420 or [::1]:7420)`);
    }
    host = v.slice(0, i);
    portText = v.slice(i + 1);
  }
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || !Number.isInteger(port) || port > 65535) {
    throw new UsageError(`${flag} '${value}': port must be a number from 0 to 65535`);
  }
  if (!opts.anyAddress && host.toLowerCase() === 'localhost') host = DEFAULT_LISTEN.host;
  if (opts.anyAddress) {
    if (!isIPv4(host) && !isIPv6(host)) throw new UsageError(`${flag} '${value}': '${host}' is not an IP address`);
  } else if (!isLoopbackAddress(host)) {
    throw new UsageError(
      `--listen '${value}': runlog serve binds only to loopback (127.0.0.0/8 or ::1); '${host}' is not a loopback address. ` +
        'The API can start and stop sandboxes: reach it from elsewhere through an SSH tunnel, not by exposing it.',
    );
  }
  return { host, port };
}

/** The Host header of a request to a loopback server must name loopback too (guards against DNS rebinding). */
export function isLoopbackHostHeader(hostHeader: string | undefined): boolean {
  if (!hostHeader) return false;
  const m = /^(?:\[([^\]]+)\]|([^:]+))(?::\d+)?$/.exec(hostHeader.trim());
  if (!m) return false;
  const name = (m[1] ?? m[2] ?? '').toLowerCase();
  return name === 'localhost' || isLoopbackAddress(name);
}
