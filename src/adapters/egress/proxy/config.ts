// The proxy's settings, from its command line over its environment (docs/decisions/0012):
//
//   --control <ip:port>          EGRESS_CONTROL           the control API's address      (127.0.0.1:3130)
//             <interface:port>                               …or an interface's IPv4 address as it is at start
//                                                            (eth0:3130: the only network a container has then)
//   --proxy-port <n>             EGRESS_PROXY_PORT        HTTP proxy port on each grant's address (3128; 0: any)
//   --dns-port <n>               EGRESS_DNS_PORT          DNS port on each grant's address (53; 0: any)
//   --resolver <ip[:port]>,…     EGRESS_RESOLVER          the resolvers the proxy asks (required)
//   --token-file <path>          EGRESS_TOKEN_FILE        the control API's bearer token, from a file…
//                                EGRESS_TOKEN             …or the environment (never the command line: ps shows it)
//   --resolve-timeout-ms <n>     EGRESS_RESOLVE_TIMEOUT_MS                              (5000)
//   --connect-timeout-ms <n>     EGRESS_CONNECT_TIMEOUT_MS                              (10000)
//   --max-reports <n>            EGRESS_MAX_REPORTS       reports the ring holds         (10000)
//   --max-reports-per-grant <n>  EGRESS_MAX_REPORTS_PER_GRANT                           (2000)
//
// Every problem is listed at once; the token's value appears in none of them.
import { parseIp } from '../../../domain/at-run/egress-address.ts';

export interface ProxyConfig {
  control: { host: string; port: number };
  proxyPort: number;
  dnsPort: number;
  resolvers: string[];
  token: string;
  resolveTimeoutMs: number;
  connectTimeoutMs: number;
  maxReports: number;
  maxReportsPerGrant: number;
}

export const MIN_TOKEN_LENGTH = 16;

const FLAGS: Record<string, string> = {
  '--control': 'EGRESS_CONTROL',
  '--proxy-port': 'EGRESS_PROXY_PORT',
  '--dns-port': 'EGRESS_DNS_PORT',
  '--resolver': 'EGRESS_RESOLVER',
  '--token-file': 'EGRESS_TOKEN_FILE',
  '--resolve-timeout-ms': 'EGRESS_RESOLVE_TIMEOUT_MS',
  '--connect-timeout-ms': 'EGRESS_CONNECT_TIMEOUT_MS',
  '--max-reports': 'EGRESS_MAX_REPORTS',
  '--max-reports-per-grant': 'EGRESS_MAX_REPORTS_PER_GRANT',
};

/** `ip:port` or `[v6]:port` (port required unless `defaultPort` is given), or null. */
export function parseHostPort(text: string, defaultPort?: number): { host: string; port: number } | null {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::([0-9]{1,5}))?$/.exec(text);
  const host = m?.[1] ?? m?.[2];
  if (!m || host === undefined || !parseIp(host)) {
    // A bare IPv6 address with no port.
    return defaultPort !== undefined && text.includes(':') && parseIp(text) ? { host: text, port: defaultPort } : null;
  }
  const port = m[3] !== undefined ? Number(m[3]) : defaultPort;
  if (port === undefined || port > 65535) return null;
  return { host, port };
}

/**
 * The control API's address: `ip:port`, or `interface:port` for that interface's IPv4 address. A container sees only
 * its first network at start, so `eth0:3130` binds the control API there and never on an execution's network.
 */
function parseControl(
  text: string,
  addressOf: (iface: string) => string | undefined,
): { host: string; port: number } | null {
  const named = /^([a-z][a-z0-9]{0,14}):([0-9]{1,5})$/.exec(text);
  if (!named) return parseHostPort(text);
  const host = addressOf(named[1] as string);
  const port = Number(named[2]);
  return host !== undefined && port <= 65535 ? { host, port } : null;
}

/** The settings, or every problem with them. `readFile` reads the token file (its errors become problems). */
export function parseConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  readFile: (path: string) => string,
  addressOf: (iface: string) => string | undefined = () => undefined,
): { config: ProxyConfig } | { problems: string[] } {
  const problems: string[] = [];
  const given: Record<string, string | undefined> = {};
  for (const name of Object.values(FLAGS)) given[name] = env[name];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--selftest') continue;
    const [flag, inline] = arg.includes('=')
      ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]
      : [arg];
    const name = FLAGS[flag as string];
    if (!name) {
      problems.push(`unknown argument ${JSON.stringify(flag)}`);
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) problems.push(`${flag} needs a value`);
    else given[name] = value;
  }
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const v = given[name];
    if (v === undefined || v === '') return fallback;
    if (!/^[0-9]{1,9}$/.test(v) || Number(v) < min || Number(v) > max)
      problems.push(`${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(v)})`);
    return Number(v);
  };
  const control = parseControl(given.EGRESS_CONTROL ?? '127.0.0.1:3130', addressOf);
  if (!control)
    problems.push(
      `EGRESS_CONTROL must be ip:port or interface:port with an IPv4 address (got ${JSON.stringify(given.EGRESS_CONTROL)})`,
    );
  const resolvers = (given.EGRESS_RESOLVER ?? '').split(',').filter((s) => s !== '');
  if (resolvers.length === 0) problems.push('EGRESS_RESOLVER (--resolver) is required: the resolvers the proxy asks');
  for (const r of resolvers)
    if (!parseHostPort(r, 53)) problems.push(`EGRESS_RESOLVER ${JSON.stringify(r)} is not ip, ip:port or [ipv6]:port`);
  let token = env.EGRESS_TOKEN ?? '';
  const file = given.EGRESS_TOKEN_FILE;
  if (file !== undefined) {
    try {
      token = readFile(file).trim();
    } catch (err) {
      problems.push(`cannot read the token file ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    }
  }
  if (token.length < MIN_TOKEN_LENGTH)
    problems.push(
      `the control token (EGRESS_TOKEN_FILE or EGRESS_TOKEN) must be ${MIN_TOKEN_LENGTH} characters or more`,
    );
  const config: ProxyConfig = {
    control: control ?? { host: '127.0.0.1', port: 3130 },
    proxyPort: int('EGRESS_PROXY_PORT', 3128, 0, 65535),
    dnsPort: int('EGRESS_DNS_PORT', 53, 0, 65535),
    resolvers,
    token,
    resolveTimeoutMs: int('EGRESS_RESOLVE_TIMEOUT_MS', 5000, 1, 60_000),
    connectTimeoutMs: int('EGRESS_CONNECT_TIMEOUT_MS', 10_000, 1, 120_000),
    maxReports: int('EGRESS_MAX_REPORTS', 10_000, 1, 1_000_000),
    maxReportsPerGrant: int('EGRESS_MAX_REPORTS_PER_GRANT', 2000, 1, 1_000_000),
  };
  return problems.length > 0 ? { problems } : { config };
}
