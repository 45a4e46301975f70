// The egress proxy's entry point: `node main.ts [flags]` under plain Node (its built-in type stripping, no
// dependencies: docs/decisions/0012). Settings are in config.ts. It logs JSON lines to stderr (where it listens,
// why it stopped; never the token), and on SIGTERM or SIGINT cuts every connection and exits 0.
//
// `--selftest` loads every module and runs the pure checks once, then prints {"ok":true}: proof that this Node runs
// the sources as they are.
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { decideConnection } from '../../../domain/at-run/egress-decision.ts';
import { parseConfig } from './config.ts';
import { parseQuery, refusedAnswer } from './dns-message.ts';
import { startEgressProxy } from './egress-proxy.ts';

const log = (event: string, fields: Record<string, unknown> = {}): void => {
  process.stderr.write(`${JSON.stringify({ at: new Date().toISOString(), event, ...fields })}\n`);
};

function selftest(): boolean {
  const grant = { destinations: [{ host: '*.example.com', ports: [443] }], allowRanges: [] };
  const allowed = decideConnection(grant, { host: 'api.example.com', port: 443 }, ['93.184.216.34']);
  const refused = decideConnection(grant, { host: 'api.example.com', port: 443 }, ['169.254.169.254']);
  const query = new Uint8Array([0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0x78, 0, 0, 1, 0, 1]);
  const parsed = parseQuery(query);
  const answer = parsed ? refusedAnswer(parsed, query) : new Uint8Array();
  return allowed.allow && !refused.allow && parsed?.name === 'x' && (answer[3] ?? 0) % 16 === 5;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--selftest')) {
    const ok = selftest();
    process.stdout.write(`${JSON.stringify({ ok, node: process.version })}\n`);
    process.exit(ok ? 0 : 1);
  }
  const ipv4Of = (iface: string) => networkInterfaces()[iface]?.find((a) => a.family === 'IPv4')?.address;
  const parsed = parseConfig(argv, process.env, (path) => readFileSync(path, 'utf8'), ipv4Of);
  if ('problems' in parsed) {
    for (const problem of parsed.problems) log('config', { problem });
    process.exit(2);
  }
  const { config } = parsed;
  const proxy = await startEgressProxy(config);
  log('listening', {
    control: proxy.control,
    proxyPort: config.proxyPort,
    dnsPort: config.dnsPort,
    resolvers: config.resolvers,
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log('stopping', { signal });
    void proxy.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

// A bug must not pass silently: say what it was, and exit (the container restarts; every grant fails closed).
process.on('uncaughtException', (err: NodeJS.ErrnoException) => {
  log('crashed', { message: err.message, code: err.code, stack: err.stack });
  process.exit(1);
});

main().catch((err: unknown) => {
  log('failed', { message: (err as Error).message, code: (err as NodeJS.ErrnoException).code });
  process.exit(1);
});
