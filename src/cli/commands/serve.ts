// `runlog serve`: the supervisor daemon. Opens the log supervising (live actors are rehydrated), makes
// sure the API token exists (0600), and serves the HTTP API and the web inspector on loopback only.
// Only light modules at the top (see command.ts): the supervisor loads when the command runs.
import { lstatSync } from 'node:fs';
import { dirname } from 'node:path';
import { resolvePaths } from '../../config/paths.ts';
import { HomeInsecureError, RunlogError, UsageError } from '../../domain/errors.ts';
import { parseListen } from '../../server/listen.ts';
import type { MetricsServer } from '../../server/metrics-server.ts';
import { runlogInternals } from '../../supervisor/runlog-internals.ts';
import type { RunlogOptions } from '../../supervisor/runlog.ts';
import type { Command, CommandArgs } from '../command.ts';
import { EXIT, printJson } from '../output.ts';
import { portRangeOf } from '../port-range.ts';
import { publishCommand, publisherFrom } from './publish-commands.ts';

const SHUTDOWN_NOTE_MS = 60_000;
const EXIT_NOTE_MS = 10_000;

/** What keeps the event loop alive now (sockets, timers, child processes), counted by kind. */
function openResources(): string {
  const counts = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) counts.set(r, (counts.get(r) ?? 0) + 1);
  return [...counts].map(([r, n]) => `${n} ${r}`).join(', ') || 'nothing';
}

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

/**
 * A directory that holds the token and server.json must be writable by this user only: anyone who can write in
 * it can plant a server.json (or replace the log). A missing one is created 0700 later; symlinks are followed
 * (a home may well be a link), and the directory they name is checked.
 */
function assertPrivateDir(dir: string): void {
  let st;
  try {
    st = lstatSync(dir, { throwIfNoEntry: false });
  } catch {
    return;
  }
  if (!st) return;
  if (st.isSymbolicLink()) st = lstatSync(`${dir}/.`);
  if ((st.mode & 0o022) !== 0) throw new HomeInsecureError(dir, st.mode & 0o777);
  const uid = typeof process.getuid === 'function' ? process.getuid() : null;
  if (uid !== null && st.uid !== uid && st.uid !== 0) {
    throw new RunlogError(
      'HOME_INSECURE',
      `${dir} belongs to uid ${st.uid}, not to this user (uid ${uid}); runlog serve refuses it`,
      { dir, uid: st.uid },
    );
  }
}

/**
 * The cluster and retention flags, checked before anything is opened or written: cluster flags need a PostgreSQL
 * store, and each number must be in its range (UsageError otherwise). The retention module loads only when asked.
 */
async function serveFlags(args: CommandArgs) {
  const node = args.values.node as string | undefined;
  const ttlText = args.values['lease-ttl'] as string | undefined;
  const graceText = args.values['collect-grace'] as string | undefined;
  const limitText = args.values['exec-limit'] as string | undefined;
  if (
    (node !== undefined || ttlText !== undefined || graceText !== undefined || limitText !== undefined) &&
    !args.store
  )
    throw new UsageError(
      '--node, --lease-ttl, --collect-grace and --exec-limit are for a cluster sharing a PostgreSQL log: ' +
        'give --store postgres://… (or $RUNLOG_STORE)',
    );
  const execLimit = limitText === undefined ? undefined : Number(limitText);
  if (execLimit !== undefined && !(Number.isInteger(execLimit) && execLimit >= 1 && execLimit <= 1000))
    throw new UsageError(`--exec-limit must be a whole number from 1 to 1000, not '${limitText}'`);
  if (node !== undefined && !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(node))
    throw new UsageError(`--node must be letters, digits, '.', '_' or '-' (at most 63), not '${node}'`);
  const leaseTtlMs = ttlText === undefined ? undefined : Number(ttlText);
  if (leaseTtlMs !== undefined && !(Number.isInteger(leaseTtlMs) && leaseTtlMs >= 300))
    throw new UsageError(`--lease-ttl must be a whole number of milliseconds ≥ 300, not '${ttlText}'`);
  const retainText = args.values.retain as string | undefined;
  const retention = retainText === undefined ? null : await import('../../supervisor/retention/retention.ts');
  const retainMs = retention ? retention.parseRetain(retainText!) : null;
  const collectGraceMs = graceText === undefined ? undefined : Number(graceText);
  if (collectGraceMs !== undefined && !(Number.isInteger(collectGraceMs) && collectGraceMs >= 0))
    throw new UsageError(`--collect-grace must be a whole number of milliseconds ≥ 0, not '${graceText}'`);
  return { node, leaseTtlMs, execLimit, collectGraceMs, retainText, retention, retainMs };
}

/**
 * `--jobs`: the runner account (the credentials `publish` takes) writes the receipts and is who jobs are addressed
 * to; the repo event stream of --jobs-from (default: that account's PDS) brings them. Checked, and the account
 * signed in, before the log is opened.
 */
/** `--egress-resolver ip[:port],…`: the egress proxy's resolvers, checked here (no loopback: unreachable from it). */
function egressFlags(args: CommandArgs): Pick<RunlogOptions, 'egress'> {
  const given = args.values['egress-resolver'] as string | undefined;
  if (given === undefined) return {};
  const resolvers = given.split(',').filter((r) => r !== '');
  const bad = resolvers.filter((r) => !/^(\d{1,3}\.){3}\d{1,3}(:\d{1,5})?$/.test(r) || r.startsWith('127.'));
  if (resolvers.length === 0 || bad.length > 0)
    throw new UsageError(
      '--egress-resolver must be IPv4 addresses (ip or ip:port, not loopback), comma-separated: ' +
        `not ${JSON.stringify(bad.length ? bad.join(',') : given)}`,
    );
  return { egress: { resolvers } };
}

async function jobsFlags(args: CommandArgs): Promise<Pick<RunlogOptions, 'receipts' | 'jobs'>> {
  const from = args.values['jobs-from'] as string | undefined;
  if (!args.values.jobs) {
    if (from !== undefined) throw new UsageError('--jobs-from <url> says where --jobs takes jobs from: give --jobs');
    return {};
  }
  if (from !== undefined && !/^(https?|wss?):\/\/[^/\s]+/i.test(from))
    throw new UsageError(`--jobs-from must be an http(s) or ws(s) URL of a relay or PDS, not '${from}'`);
  const receipts = await publisherFrom(
    args,
    'runlog serve --jobs (the runner account: jobs name its DID, their receipts go to its repo)',
  );
  return { receipts, jobs: { from: from ?? receipts.pdsUrl } };
}

/** A listen that failed for a reason of the address (in use, not available, not allowed): LISTEN_FAILED. */
function listenFailed(err: unknown, at: { host: string; port: number }): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE' || code === 'EADDRNOTAVAIL' || code === 'EACCES') {
    return new RunlogError('LISTEN_FAILED', `cannot listen on ${at.host}:${at.port}: ${code}`, {
      host: at.host,
      port: at.port,
    });
  }
  return err;
}

/** Closes the supervisor, saying what still holds the process if closing (or exiting after it) takes long. */
async function closeNoting(rl: { close(): Promise<void> }, logger: { flush(): void }): Promise<void> {
  // A supervisor that does not exit once asked to says what it still holds (a shutdown that hung once in CI
  // showed nothing): timers unref'd, so they never keep the process alive themselves.
  const stuck = setTimeout(
    () =>
      process.stderr.write(
        `runlog: still shutting down after ${SHUTDOWN_NOTE_MS / 1000} s; open: ${openResources()}\n`,
      ),
    SHUTDOWN_NOTE_MS,
  ).unref();
  await rl.close();
  clearTimeout(stuck);
  logger.flush();
  setTimeout(
    () =>
      process.stderr.write(
        `runlog: closed, but still running ${EXIT_NOTE_MS / 1000} s later; open: ${openResources()}\n`,
      ),
    EXIT_NOTE_MS,
  ).unref();
}

export const serveCommand: Command = {
  name: 'serve',
  summary: 'run the supervisor with its HTTP API and web inspector (loopback only, bearer token)',
  usage:
    'runlog serve [--listen 127.0.0.1:<port>] [--metrics-listen <ip>:<port>] [--log-level info] [--plc <url>] ' +
    '[--retain <duration>] [--ports <min>-<max>] [--home <dir>] ' +
    '[--db <path> | --store <url> [--node <name>] [--lease-ttl <ms>] [--collect-grace <ms>] [--exec-limit <n>]] ' +
    '[--jobs [--jobs-from <url>] --pds <url> --identifier <id> --password <pw>] ' +
    '[--egress-resolver <ip[:port],…>] [--json]   (--json prints {url, host, port, …} on stdout)',
  options: {
    listen: {
      type: 'string',
      value: '<host:port>',
      description: 'where the API and inspector listen (loopback only)',
      defaultText: '127.0.0.1:7420',
    },
    'metrics-listen': {
      type: 'string',
      value: '<ip>:<port>',
      description: 'also serve /metrics without a token on this address',
      defaultText: 'off',
    },
    'log-level': {
      type: 'string',
      value: '<level>',
      description: "log level of the supervisor's log on stderr",
      defaultText: 'info',
    },
    plc: {
      type: 'string',
      value: '<url>',
      description: 'PLC directory for DID resolution',
      defaultText: '$RUNLOG_PLC_URL, else https://plc.directory',
    },
    ports: {
      type: 'string',
      value: '<min>-<max>',
      description: 'the TCP ports PRoot instances are given; give each supervisor on one host a range of its own',
      defaultText: '$RUNLOG_PORTS, else 4100-4999',
    },
    node: {
      type: 'string',
      value: '<name>',
      description:
        "this supervisor's name in a cluster sharing a PostgreSQL --store (it owns what it creates through leases)",
      defaultText: 'the host name',
    },
    retain: {
      type: 'string',
      value: '<duration>',
      description:
        'retention: every hour (and at start), archive actors that ended longer ago than this (30d) ' +
        'to <home>/archives (SQLite or PostgreSQL: one archiver at a time across the cluster)',
      defaultText: 'keep everything',
    },
    'lease-ttl': {
      type: 'string',
      value: '<ms>',
      description:
        'how long a lease lives unrenewed: when a survivor takes over the actors of a supervisor that stopped (PostgreSQL only)',
      defaultText: '15000',
    },
    'exec-limit': {
      type: 'string',
      value: '<n>',
      description:
        'how many executions this node runs at once; queued ones are claimed by nodes with room ' +
        "(PostgreSQL only; on SQLite the operator policy's executions.maxRunning bounds them)",
      defaultText: "the operator policy's executions.maxRunning, 8",
    },
    'collect-grace': {
      type: 'string',
      value: '<ms>',
      description:
        "how long after its lease expired an execution's supervisor may come back and collect it " +
        'before a survivor records it failed (lost)',
      defaultText: 'the lease TTL',
    },
    jobs: {
      type: 'boolean',
      default: false,
      description:
        'take job records addressed to the runner account from the network and answer each with a receipt ' +
        "(and its result) in that account's repo; needs the account (--pds, --identifier, --password)",
    },
    'jobs-from': {
      type: 'string',
      value: '<url>',
      description: 'with --jobs: the relay or PDS whose repo event stream (subscribeRepos) brings the jobs',
      defaultText: "the runner account's PDS",
    },
    'egress-resolver': {
      type: 'string',
      value: '<ip[:port],…>',
      description:
        'the resolvers the egress proxy asks for executions the policy grants network ' +
        '(never a loopback address: the proxy runs in a container)',
      defaultText: "the host's, from /etc/resolv.conf",
    },
    pds: { ...publishCommand.options!.pds!, description: "with --jobs: the runner account's PDS" },
    identifier: { ...publishCommand.options!.identifier!, description: 'with --jobs: the runner account' },
    password: publishCommand.options!.password!,
  },
  examples: [
    'RUNLOG_HOME=/var/lib/runlog runlog serve --listen 127.0.0.1:7420',
    'runlog serve --store postgres://runlog:runlog@db:5432/runlog --node a --home /var/lib/runlog-a',
    'RUNLOG_PDS_URL=https://pds.example RUNLOG_IDENTIFIER=runner.example RUNLOG_PASSWORD=… runlog serve --jobs',
  ],
  run: async (args, io) => {
    const [
      { createRunlog },
      { startServer },
      { startMetricsServer },
      { ensureToken },
      { createLogger, logActors, parseLogLevel },
      { atprotoOptions, removeServerInfo, writeServerInfo },
    ] = await Promise.all([
      import('../../supervisor/runlog.ts'),
      import('../../server/http-server.ts'),
      import('../../server/metrics-server.ts'),
      import('../../server/token.ts'),
      import('../logger.ts'),
      import('../client.ts'),
    ]);
    // Refuse a bad address (or cluster flags without a PostgreSQL store) before anything is opened or written.
    const { node, leaseTtlMs, execLimit, collectGraceMs, retainText, retention, retainMs } = await serveFlags(args);
    const jobs = await jobsFlags(args);
    const egress = egressFlags(args);
    const portRange = portRangeOf(args.values.ports as string | undefined);
    const listen = parseListen(args.values.listen as string | undefined);
    const metricsAt =
      args.values['metrics-listen'] === undefined
        ? null
        : parseListen(args.values['metrics-listen'] as string, { flag: '--metrics-listen', anyAddress: true });
    const logger = createLogger({
      level: parseLogLevel(args.values['log-level'] as string | undefined),
      ...(node ? { node } : {}),
    });
    const say = (m: string) => logger.info(m);
    const paths = resolvePaths({ home: args.home, db: args.db });
    assertPrivateDir(paths.home);
    if (!args.store && dirname(paths.db) !== paths.home) assertPrivateDir(dirname(paths.db));
    // Takes the log's writer lock first: a second supervisor stops here, having touched nothing. (On PostgreSQL
    // there is no file to lock.)
    // Fault injection for recovery and chaos tests (supervisor/host/faults.ts): RUNLOG_FAULT, RUNLOG_FAULT_EVENT, RUNLOG_FAULT_ACTION.
    const faults = process.env.RUNLOG_FAULT
      ? (await import('../../supervisor/host/faults.ts')).faultsFromEnv()
      : undefined;
    const rl = await createRunlog({
      home: paths.home,
      ...(faults ? { faults } : {}),
      ...(args.store ? { store: args.store } : { db: paths.db }),
      ...(node ? { node } : {}),
      ...(leaseTtlMs ? { leaseTtlMs } : {}),
      ...(collectGraceMs !== undefined ? { collectGraceMs } : {}),
      ...(execLimit !== undefined ? { execLimit } : {}),
      ...(portRange ? { portRange } : {}),
      ...jobs,
      ...egress,
      command: 'runlog serve',
      log: say,
      atproto: atprotoOptions(args.values.plc as string | undefined),
    });
    const internals = runlogInternals(rl);
    const unlog = logActors(internals.bus, logger);
    let stopRetention: (() => void) | undefined;
    let server;
    let metricsServer: MetricsServer | undefined;
    try {
      const token = ensureToken(rl.home);
      if (token.created) say(`created API token ${token.path} (mode 0600)`);
      if (token.tightenedFrom !== undefined)
        logger.warn(`${token.path} had mode 0${token.tightenedFrom.toString(8)}; set it to 0600`);
      try {
        server = await startServer({
          runlog: rl,
          host: listen.host,
          port: listen.port,
          token: token.token,
          log: (m) => logger.error(m),
        });
      } catch (err) {
        throw listenFailed(err, listen);
      }
      if (metricsAt && internals.metrics) {
        try {
          metricsServer = await startMetricsServer(internals.metrics, metricsAt.host, metricsAt.port);
        } catch (err) {
          throw listenFailed(err, metricsAt);
        }
      }
      // Where the mutating CLI commands find this supervisor (and what a refused second one names): written
      // before the address is announced, so a caller that saw the address can reach it through server.json.
      internals.writer?.setListen(server.url);
      writeServerInfo(rl.home, { url: server.url, pid: process.pid, db: rl.dbPath });
      say(`supervising ${rl.dbPath} (${(await rl.list()).length} live actors)`);
      if (retention && retainMs !== null) {
        stopRetention = retention.startRetention(internals.archiving, rl.home, { retainMs }, say);
        say(`retention: actors that ended more than ${retainText} ago are archived to ${rl.home}/archives, every hour`);
      }
      if (jobs.jobs && jobs.receipts)
        say(`taking jobs for ${jobs.receipts.did} from ${jobs.jobs.from}; receipts go to ${jobs.receipts.pdsUrl}`);
      say(`inspector at ${server.inspectorUrl}`);
      say(`API at ${server.url}api/ (Authorization: Bearer <contents of ${token.path}>); Ctrl-C stops`);
      say(`metrics at ${server.url}metrics (same token)${metricsServer ? ` and ${metricsServer.url} (no token)` : ''}`);
      if (io.json) {
        printJson(io, {
          url: server.url,
          host: server.host,
          port: server.port,
          home: rl.home,
          db: rl.dbPath,
          tokenFile: token.path,
          pid: process.pid,
          metricsUrl: metricsServer?.url ?? null,
        });
      }
      const sig = await untilSignal();
      say(`${sig}: shutting down`);
      return EXIT.ok;
    } finally {
      stopRetention?.();
      removeServerInfo(rl.home, process.pid);
      await metricsServer?.close();
      await server?.close();
      unlog();
      await closeNoting(rl, logger);
    }
  },
};
