// `runlog demo` (npm run demo): the first run, on the embedded default stack — the local SQLite log, an
// in-process PDS and PLC, the local registry and runtime images. It spawns the example app in both
// sandboxes, publishes and runs the example at-run code in both languages, serves the inspector, and
// stops what it started on Ctrl-C (or right away with --once).
//
// Whatever ends it — Ctrl-C, SIGTERM, or the reader of its output going away (`npm run demo | tee demo.log`,
// then Ctrl-C: tee dies first) — it stops everything it started before it exits; signals that arrive while it
// is stopping do not cut the cleanup short.
// Only light modules at the top (see command.ts): the demo's stack loads when the command runs.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Runlog } from '../../supervisor/runlog.ts';
import { runlogInternals } from '../../supervisor/runlog-internals.ts';
import type { ExecutionContext, InstanceContext } from '../../index.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/supervisor
import type { LocalAccount, LocalNetwork } from '../../adapters/atproto/index.ts';
import { RunlogError } from '../../domain/errors.ts';
import { parseListen } from '../../server/listen.ts';
import type { Command } from '../command.ts';
import { EXIT, printJson, type Io } from '../output.ts';

const REPO = resolve(import.meta.dirname, '../../..');

/**
 * Resolves on the first SIGINT or SIGTERM, or when stdout's reader goes away. A second signal (npm forwarding
 * one, an impatient Ctrl-C) is noted instead of killing the process halfway through stopping what it started.
 * `release(status)` is called once everything is stopped: the handlers stay installed, and a signal that arrives
 * between then and the process's natural exit ends it at once with the demo's own status — never with the
 * signal's default death, which would report a clean stop as a crash.
 */
export function demoStopper(
  io: Io,
  say: (m: string) => void,
): { stopped: Promise<string>; release: (status: number) => void } {
  let fire!: (why: string) => void;
  let fired = false;
  let finalStatus: number | null = null;
  const stopped = new Promise<string>((resolveStop) => {
    fire = (why) => {
      if (finalStatus !== null) process.exit(finalStatus);
      if (fired) {
        say(`${why}: still stopping what the demo started…`);
        return;
      }
      fired = true;
      resolveStop(why);
    };
  });
  const onSignal = (sig: NodeJS.Signals) => fire(sig);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);
  const offClosed = io.onClosed?.(() => fire('output closed'));
  return {
    stopped,
    release: (status) => {
      finalStatus = status;
      offClosed?.();
    },
  };
}

async function checkParts(): Promise<void> {
  const { discoverParts, requireImage, requireRootfs } = await import('../../config/parts.ts');
  const { createDockerEngine } = await import('../../adapters/docker/dockerode-engine.ts');
  const parts = discoverParts();
  requireRootfs(parts);
  for (const name of ['app-base', 'at-run-sandbox', 'runtime-node', 'runtime-python']) requireImage(parts, name);
  try {
    await createDockerEngine({ socketPath: parts.dockerSocket }).ping();
  } catch (err) {
    throw new RunlogError(
      'SETUP_MISSING',
      `Docker Engine does not answer on ${parts.dockerSocket} (${(err as Error).message}): run \`npm run setup\``,
    );
  }
  if (!existsSync('/usr/bin/proot'))
    throw new RunlogError('SETUP_MISSING', 'proot is not installed: run `npm run setup`');
}

type Account = Awaited<ReturnType<LocalNetwork['createAccount']>>;
type Publishing = typeof import('../../supervisor/executions/publishing.ts');

/** Publishes the example runtime records (node, python) and the example code on them: the code URIs by language. */
async function publishExamples(
  { publishCode, publishRuntime }: Pick<Publishing, 'publishCode' | 'publishRuntime'>,
  runtimeImage: (lang: string) => string,
  accounts: { runtimes: Account; code: Account },
  atproto: { plcUrl: string },
  say: (m: string) => void,
): Promise<Record<string, string>> {
  const runtimes: Record<string, { uri: string; cid: string }> = {};
  for (const lang of ['node', 'python']) {
    const r = await publishRuntime(accounts.runtimes.publisher, {
      dir: join(REPO, 'runtimes', lang),
      image: runtimeImage(lang),
    });
    runtimes[lang] = { uri: r.uri, cid: r.cid };
    say(`published runtime record ${lang}: ${r.uri} (${r.cid})`);
  }
  const code: Record<string, string> = {};
  for (const [lang, dir] of [
    ['node', 'greet-node'],
    ['python', 'greet-python'],
  ] as const) {
    const c = await publishCode(accounts.code.publisher, {
      dir: join(REPO, 'examples', dir),
      runtime: runtimes[lang]!.uri,
      atproto,
    });
    code[lang] = c.uri;
    say(`published code record ${dir}: ${c.uri}`);
  }
  return code;
}

/** Spawns the example app in both sandboxes; each id joins `instances` as soon as it runs (the cleanup kills them). */
async function spawnExamples(rl: Runlog, instances: string[], say: (m: string) => void) {
  const spawned = [];
  for (const sandbox of ['proot', 'container'] as const) {
    say(`spawning examples/hello-app in ${sandbox}…`);
    const view = await rl.spawnApp({ appDir: join(REPO, 'examples/hello-app'), sandbox });
    instances.push(view.id);
    const c = view.context as InstanceContext;
    spawned.push({ id: view.id, sandbox, state: view.state, url: `http://${c.host}:${c.port}/` });
    say(`  ${view.id} ${view.state} at http://${c.host}:${c.port}/ (identity ${c.identity})`);
  }
  return spawned;
}

/** Runs the example code's greet handler in both languages, as the code's author. */
async function executeExamples(rl: Runlog, code: Record<string, string>, callerDid: string, say: (m: string) => void) {
  const executions = [];
  for (const lang of ['node', 'python']) {
    say(`executing ${lang} greet from ${code[lang]}…`);
    const out = await rl.execute({
      uri: code[lang]!,
      handler: 'greet',
      input: { name: 'Ada' },
      callerDid,
    });
    executions.push({
      id: out.executionId,
      language: lang,
      status: out.status,
      output: out.output ?? null,
      failure: out.failure ?? null,
    });
    say(`  ${out.executionId} ${out.status}: ${JSON.stringify(out.output ?? out.failure)}`);
  }
  return executions;
}

/** How long the demo waits for the runner to answer its job. */
const JOB_WAIT_MS = 60_000;

/**
 * A job from the network: alice writes a job record in her own repo, addressed to the runner; the runner takes it
 * from the PDS's repo event stream, runs it, and answers with a receipt in its own repo before recording the outcome.
 */
async function answerJob(
  rl: Runlog,
  alice: LocalAccount,
  runnerDid: string,
  codeUri: string,
  say: (m: string) => void,
): Promise<{ id: string; job: string; status: string; output: unknown; failure: unknown }> {
  const [{ AT_RUN_V2 }, { jobExecutionId }] = await Promise.all([
    import('../../adapters/atproto/index.ts'),
    import('../../adapters/ids.ts'),
  ]);
  say(`alice writes a job in her own repo, addressed to the runner (${runnerDid})…`);
  const ended = new Set<string>();
  let wake = () => undefined as void;
  const off = rl.on('actor:transition', (t) => {
    if (t.kind !== 'execution' || (t.to !== 'succeeded' && t.to !== 'failed')) return;
    ended.add(t.id);
    wake();
  });
  try {
    const job = await alice.publisher.putRecord(AT_RUN_V2.job, undefined, {
      code: codeUri,
      handler: 'greet',
      input: { name: 'Grace' },
      runner: runnerDid,
      createdAt: new Date().toISOString(),
    });
    const id = jobExecutionId(job.uri, job.cid);
    const until = Date.now() + JOB_WAIT_MS;
    while (!ended.has(id) && Date.now() < until) await new Promise<void>((r) => ((wake = r), setTimeout(r, 500)));
    if (!ended.has(id)) {
      say(`  ${job.uri} was not answered within ${JOB_WAIT_MS / 1000} s`);
      return { id, job: job.uri, status: 'unanswered', output: null, failure: null };
    }
    const ctx = (await rl.inspect(id)).context as ExecutionContext;
    const status = ctx.outcome?.status ?? 'failed';
    say(`  ${id} ${status}: ${JSON.stringify(ctx.result?.output ?? ctx.failure)} (receipt in the runner's repo)`);
    return { id, job: job.uri, status, output: ctx.result?.output ?? null, failure: ctx.failure };
  } finally {
    off();
  }
}

/** What the demo started and where to look: JSON with --json, else the addresses and commands to try. */
function printRunning(
  io: Io,
  d: {
    rl: Runlog;
    server: { inspectorUrl: string; url: string };
    net: LocalNetwork;
    spawned: Awaited<ReturnType<typeof spawnExamples>>;
    executions: Awaited<ReturnType<typeof executeExamples>>;
    job: Awaited<ReturnType<typeof answerJob>>;
    code: Record<string, string>;
    instances: string[];
  },
): void {
  const { rl, server, net, spawned, executions, job, code, instances } = d;
  const env = `RUNLOG_HOME=${rl.home}`;
  if (io.json)
    printJson(io, {
      inspector: server.inspectorUrl,
      api: server.url,
      home: rl.home,
      db: rl.dbPath,
      pds: net.pdsUrl,
      plc: net.plcUrl,
      instances: spawned,
      executions,
      job,
      code,
    });
  else {
    io.out(
      `\nrunlog is running.\n\n  inspector   ${server.inspectorUrl}\n  log         ${rl.dbPath}\n` +
        `  PDS         ${net.pdsUrl} (PLC ${net.plcUrl})\n`,
    );
    io.out('try, in another shell:');
    io.out(`  ${env} runlog ps --all`);
    io.out(`  ${env} runlog events ${instances[0]} --follow`);
    io.out(`  ${env} runlog replay ${executions[0]!.id} --step`);
    io.out(`  ${env} runlog cap grant com.example.hello git   # every instance of the app`);
    io.out(`  ${env} runlog exec ${code.python} greet --input '{"name":"Grace"}'`);
    io.out(`  ${env} runlog logs ${instances[1]}`);
    io.out('\n(runlog is `node bin/runlog.js` in this checkout.) Ctrl-C stops the demo and everything it started.');
  }
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'the first run: example app in both sandboxes, example at-run code in both languages, the inspector',
  usage: 'runlog demo [--home <dir>] [--listen 127.0.0.1:<port>] [--once] [--keep] [--json]',
  options: {
    listen: {
      type: 'string',
      value: '<host:port>',
      description: 'where the API and inspector listen (loopback only)',
      defaultText: '127.0.0.1:7077',
    },
    once: { type: 'boolean', default: false, description: 'stop everything and exit right after the run' },
    keep: { type: 'boolean', default: false, description: 'leave the containers running when the demo exits' },
  },
  examples: ['npm run demo', 'runlog demo --once --json'],
  async run(args, io) {
    const listen = parseListen((args.values.listen as string | undefined) ?? '127.0.0.1:7077');
    const say = (m: string) => io.err(`runlog demo: ${m}`);
    // First: an installed package without the embedded PDS says so before anything starts.
    await (await import('../../adapters/atproto/index.ts')).requireDevEnv();
    await checkParts();
    const [
      { discoverParts, requireImage },
      { resolvePaths },
      { publishCode, publishRuntime },
      { createRunlog },
      { startLocalNetwork },
      { startServer },
      { ensureToken },
      { removeServerInfo, writeServerInfo },
      { WriterLock },
    ] = await Promise.all([
      import('../../config/parts.ts'),
      import('../../config/paths.ts'),
      import('../../supervisor/executions/publishing.ts'),
      import('../../supervisor/runlog.ts'),
      import('../../adapters/atproto/index.ts'),
      import('../../server/http-server.ts'),
      import('../../server/token.ts'),
      import('../client.ts'),
      import('../../store/sqlite/writer-lock.ts'),
    ]);
    // The log's writer lock before the minutes of setup: a second demo (or a running supervisor) stops here.
    const paths = resolvePaths({ home: args.home, db: args.db });
    const lock = WriterLock.acquire(paths.db, 'runlog demo');
    // From here on, a signal or a closed output ends the demo through the cleanup below, never around it.
    const stopper = demoStopper(io, say);
    let net: LocalNetwork | null = null;
    let rl: Runlog | null = null;
    let server: Awaited<ReturnType<typeof startServer>> | null = null;
    const instances: string[] = [];
    let status: number = EXIT.failure;
    try {
      say('starting an in-process PDS and PLC directory (the embedded default network)…');
      net = await startLocalNetwork();
      const publisher = await net.createAccount('runtimes.test');
      const alice = await net.createAccount('alice.test');
      const runner = await net.createAccount('runner.test'); // the runner's own repo: execution receipts go there
      const parts = discoverParts();
      const atproto = { plcUrl: net.plcUrl };
      const code = await publishExamples(
        { publishCode, publishRuntime },
        (lang) => requireImage(parts, `runtime-${lang}`),
        { runtimes: publisher, code: alice },
        atproto,
        say,
      );

      rl = await createRunlog({
        home: paths.home,
        db: paths.db,
        atproto,
        receipts: runner.publisher,
        jobs: { from: net.pdsUrl },
        writerLock: lock,
        log: (m) => io.err(`runlog: ${m}`),
      });
      const token = ensureToken(rl.home);
      server = await startServer({
        runlog: rl,
        host: listen.host,
        port: listen.port,
        token: token.token,
        log: (m) => io.err(`runlog: ${m}`),
      });
      runlogInternals(rl).writer?.setListen(server.url);
      writeServerInfo(rl.home, { url: server.url, pid: process.pid, db: rl.dbPath });
      say(`supervising ${rl.dbPath}`);

      const spawned = await spawnExamples(rl, instances, say);
      const executions = await executeExamples(rl, code, alice.did, say);
      const job = await answerJob(rl, alice, runner.did, code.node!, say);
      printRunning(io, { rl, server, net, spawned, executions, job, code, instances });
      if (!args.values.once) {
        const keepAlive = setInterval(() => undefined, 1 << 30);
        const why = await stopper.stopped;
        clearInterval(keepAlive);
        say(`${why}: stopping`);
      }
      status = executions.every((e) => e.status === 'succeeded') && job.status === 'succeeded' ? EXIT.ok : EXIT.failure;
      return status;
    } finally {
      say('shutting down');
      if (rl && !args.values.keep) {
        for (const id of instances) await rl.kill(id).catch(() => undefined);
      }
      if (rl) removeServerInfo(rl.home, process.pid);
      await server?.close().catch(() => undefined);
      await rl?.close().catch(() => undefined);
      lock.release(); // no-op when rl.close() released it
      await net?.close().catch(() => undefined);
      stopper.release(status);
    }
  },
};
