// `runlog serve`: the supervisor daemon. Opens the log supervising (live actors are rehydrated), makes
// sure the API token exists (0600), and serves the HTTP API and the web inspector on loopback only.
import { createRunlog } from '../../actors/runlog.ts';
import { RunlogError } from '../../domain/errors.ts';
import { startServer } from '../../server/http-server.ts';
import { parseListen } from '../../server/listen.ts';
import { startMetricsServer, type MetricsServer } from '../../server/metrics-server.ts';
import { ensureToken } from '../../server/token.ts';
import { createLogger, logActors, parseLogLevel } from '../logger.ts';
import type { Command } from '../command.ts';
import { atprotoOptions, removeServerInfo, writeServerInfo } from '../client.ts';
import { EXIT, printJson } from '../output.ts';

/** Resolves on the first SIGINT or SIGTERM. */
function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (sig: NodeJS.Signals) => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
      resolve(sig);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

export const serveCommand: Command = {
  name: 'serve',
  summary: 'run the supervisor with its HTTP API and web inspector (loopback only, bearer token)',
  usage:
    'runlog serve [--listen 127.0.0.1:<port>] [--metrics-listen <ip>:<port>] [--log-level info] [--plc <url>] [--home <dir>] [--db <path>] [--json]   (--json prints {url, host, port, …} on stdout)',
  options: { listen: { type: 'string' }, 'metrics-listen': { type: 'string' }, 'log-level': { type: 'string' }, plc: { type: 'string' } },
  run: async (args, io) => {
    // Refuse a bad address before anything is opened or written.
    const listen = parseListen(args.values.listen as string | undefined);
    const metricsAt = args.values['metrics-listen'] === undefined ? null : parseListen(args.values['metrics-listen'] as string, { flag: '--metrics-listen', anyAddress: true });
    const logger = createLogger({ level: parseLogLevel(args.values['log-level'] as string | undefined) });
    const say = (m: string) => logger.info(m);
    const rl = await createRunlog({ home: args.home, db: args.db, log: say, atproto: atprotoOptions(args.values.plc as string | undefined) });
    const unlog = logActors(rl.bus, logger);
    let server;
    let metricsServer: MetricsServer | undefined;
    try {
      const token = ensureToken(rl.home);
      if (token.created) say(`created API token ${token.path} (mode 0600)`);
      if (token.tightenedFrom !== undefined) logger.warn(`${token.path} had mode 0${token.tightenedFrom.toString(8)}; set it to 0600`);
      const listenFailed = (err: unknown, at: { host: string; port: number }) => {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EADDRINUSE' || code === 'EADDRNOTAVAIL' || code === 'EACCES') {
          return new RunlogError('LISTEN_FAILED', `cannot listen on ${at.host}:${at.port}: ${code}`, { host: at.host, port: at.port });
        }
        return err;
      };
      try {
        server = await startServer({ runlog: rl, host: listen.host, port: listen.port, token: token.token, log: (m) => logger.error(m) });
      } catch (err) {
        throw listenFailed(err, listen);
      }
      if (metricsAt && rl.metrics) {
        try {
          metricsServer = await startMetricsServer(rl.metrics, metricsAt.host, metricsAt.port);
        } catch (err) {
          throw listenFailed(err, metricsAt);
        }
      }
      say(`supervising ${rl.dbPath} (${rl.list().length} live actors)`);
      say(`inspector at ${server.inspectorUrl}`);
      say(`API at ${server.url}api/ (Authorization: Bearer <contents of ${token.path}>); Ctrl-C stops`);
      say(`metrics at ${server.url}metrics (same token)${metricsServer ? ` and ${metricsServer.url} (no token)` : ''}`);
      if (io.json) {
        printJson(io, { url: server.url, host: server.host, port: server.port, home: rl.home, db: rl.dbPath, tokenFile: token.path, pid: process.pid, metricsUrl: metricsServer?.url ?? null });
      }
      // Where the mutating CLI commands find this supervisor.
      writeServerInfo(rl.home, { url: server.url, pid: process.pid });
      const sig = await untilSignal();
      say(`${sig}: shutting down`);
      return EXIT.ok;
    } finally {
      removeServerInfo(rl.home, process.pid);
      await metricsServer?.close();
      await server?.close();
      unlog();
      await rl.close();
      logger.flush();
    }
  },
};
