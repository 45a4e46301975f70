// `runlog serve`: the supervisor daemon. Opens the log supervising (live actors are rehydrated), makes
// sure the API token exists (0600), and serves the HTTP API and the web inspector on loopback only.
import { createRunlog } from '../../actors/runlog.ts';
import { RunlogError } from '../../domain/errors.ts';
import { startServer } from '../../server/http-server.ts';
import { parseListen } from '../../server/listen.ts';
import { ensureToken } from '../../server/token.ts';
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
  usage: 'runlog serve [--listen 127.0.0.1:<port>] [--plc <url>] [--home <dir>] [--db <path>] [--json]   (--json prints {url, host, port, …} on stdout)',
  options: { listen: { type: 'string' }, plc: { type: 'string' } },
  run: async (args, io) => {
    // Refuse a bad address before anything is opened or written.
    const listen = parseListen(args.values.listen as string | undefined);
    const rl = await createRunlog({ home: args.home, db: args.db, log: (m) => io.err(`runlog: ${m}`), atproto: atprotoOptions(args.values.plc as string | undefined) });
    let server;
    try {
      const token = ensureToken(rl.home);
      if (token.created) io.err(`runlog: created API token ${token.path} (mode 0600)`);
      if (token.tightenedFrom !== undefined) io.err(`runlog: ${token.path} had mode 0${token.tightenedFrom.toString(8)}; set it to 0600`);
      try {
        server = await startServer({ runlog: rl, host: listen.host, port: listen.port, token: token.token, log: (m) => io.err(`runlog: ${m}`) });
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EADDRINUSE' || code === 'EADDRNOTAVAIL' || code === 'EACCES') {
          throw new RunlogError('LISTEN_FAILED', `cannot listen on ${listen.host}:${listen.port}: ${code}`, { host: listen.host, port: listen.port });
        }
        throw err;
      }
      io.err(`runlog: supervising ${rl.dbPath} (${rl.list().length} live actors)`);
      io.err(`runlog: inspector at ${server.inspectorUrl}`);
      io.err(`runlog: API at ${server.url}api/ (Authorization: Bearer <contents of ${token.path}>); Ctrl-C stops`);
      if (io.json) printJson(io, { url: server.url, host: server.host, port: server.port, home: rl.home, db: rl.dbPath, tokenFile: token.path, pid: process.pid });
      // Where the mutating CLI commands find this supervisor.
      writeServerInfo(rl.home, { url: server.url, pid: process.pid });
      const sig = await untilSignal();
      io.err(`runlog: ${sig}: shutting down`);
      return EXIT.ok;
    } finally {
      removeServerInfo(rl.home, process.pid);
      await server?.close();
      await rl.close();
    }
  },
};
