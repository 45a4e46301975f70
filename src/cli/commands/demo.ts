// `runlog demo` (npm run demo): the first run, on the embedded default stack — the local SQLite log, an
// in-process PDS and PLC, the local registry and runtime images. It spawns the example app in both
// sandboxes, publishes and runs the example at-run code in both languages, serves the inspector, and
// stops what it started on Ctrl-C (or right away with --once).
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { discoverParts, requireImage, requireRootfs } from '../../actors/parts.ts';
import { resolvePaths } from '../../actors/paths.ts';
import { publishCode, publishRuntime } from '../../actors/publishing.ts';
import { createRunlog, type Runlog } from '../../actors/runlog.ts';
import { requireDevEnv, startLocalNetwork, type LocalNetwork } from '../../adapters/atproto/index.ts';
import { createDockerEngine } from '../../adapters/docker/engine.ts';
import { RunlogError } from '../../domain/errors.ts';
import { startServer } from '../../server/http-server.ts';
import { WriterLock } from '../../store/writer-lock.ts';
import { parseListen } from '../../server/listen.ts';
import { ensureToken } from '../../server/token.ts';
import { removeServerInfo, writeServerInfo } from '../client.ts';
import type { Command } from '../command.ts';
import { EXIT, printJson } from '../output.ts';

const REPO = resolve(import.meta.dirname, '../../..');

async function checkParts(): Promise<void> {
  const parts = discoverParts();
  requireRootfs(parts);
  for (const name of ['app-base', 'at-run-sandbox', 'runtime-node', 'runtime-python']) requireImage(parts, name);
  try {
    await createDockerEngine({ socketPath: parts.dockerSocket }).ping();
  } catch (err) {
    throw new RunlogError('SETUP_MISSING', `Docker Engine does not answer on ${parts.dockerSocket} (${(err as Error).message}): run \`npm run setup\``);
  }
  if (!existsSync('/usr/bin/proot')) throw new RunlogError('SETUP_MISSING', 'proot is not installed: run `npm run setup`');
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'the first run: example app in both sandboxes, example at-run code in both languages, the inspector',
  usage: 'runlog demo [--home <dir>] [--listen 127.0.0.1:<port>] [--once] [--keep] [--json]',
  options: { listen: { type: 'string' }, once: { type: 'boolean', default: false }, keep: { type: 'boolean', default: false } },
  async run(args, io) {
    const listen = parseListen((args.values.listen as string | undefined) ?? '127.0.0.1:7077');
    const say = (m: string) => io.err(`runlog demo: ${m}`);
    await requireDevEnv(); // first: an installed package without the embedded PDS says so before anything starts
    await checkParts();
    // The log's writer lock before the minutes of setup: a second demo (or a running supervisor) stops here.
    const paths = resolvePaths({ home: args.home, db: args.db });
    const lock = WriterLock.acquire(paths.db, 'runlog demo');
    let net: LocalNetwork | null = null;
    let rl: Runlog | null = null;
    let server: Awaited<ReturnType<typeof startServer>> | null = null;
    const instances: string[] = [];
    try {
      say('starting an in-process PDS and PLC directory (the embedded default network)…');
      net = await startLocalNetwork();
      const publisher = await net.createAccount('runtimes.test');
      const alice = await net.createAccount('alice.test');
      const runner = await net.createAccount('runner.test'); // the runner's own repo: execution receipts go there
      const parts = discoverParts();
      const atproto = { plcUrl: net.plcUrl };
      const runtimes: Record<string, { uri: string; cid: string }> = {};
      for (const lang of ['node', 'python']) {
        const r = await publishRuntime(publisher.publisher, { dir: join(REPO, 'runtimes', lang), image: requireImage(parts, `runtime-${lang}`) });
        runtimes[lang] = { uri: r.uri, cid: r.cid };
        say(`published runtime record ${lang}: ${r.uri} (${r.cid})`);
      }
      const code: Record<string, string> = {};
      for (const [lang, dir] of [['node', 'greet-node'], ['python', 'greet-python']] as const) {
        const c = await publishCode(alice.publisher, { dir: join(REPO, 'examples', dir), runtime: runtimes[lang]!.uri, atproto });
        code[lang] = c.uri;
        say(`published code record ${dir}: ${c.uri}`);
      }

      rl = await createRunlog({ home: paths.home, db: paths.db, atproto, receipts: runner.publisher, writerLock: lock, log: (m) => io.err(`runlog: ${m}`) });
      const token = ensureToken(rl.home);
      server = await startServer({ runlog: rl, host: listen.host, port: listen.port, token: token.token, log: (m) => io.err(`runlog: ${m}`) });
      rl.writer?.setListen(server.url);
      writeServerInfo(rl.home, { url: server.url, pid: process.pid, db: rl.dbPath });
      say(`supervising ${rl.dbPath}`);

      const spawned = [];
      for (const sandbox of ['proot', 'container'] as const) {
        say(`spawning examples/hello-app in ${sandbox}…`);
        const view = await rl.spawnApp({ appDir: join(REPO, 'examples/hello-app'), sandbox });
        instances.push(view.id);
        const c = view.context as Record<string, any>;
        spawned.push({ id: view.id, sandbox, state: view.state, url: `http://${c.host}:${c.port}/` });
        say(`  ${view.id} ${view.state} at http://${c.host}:${c.port}/ (identity ${c.identity})`);
      }
      const executions = [];
      for (const lang of ['node', 'python']) {
        say(`executing ${lang} greet from ${code[lang]}…`);
        const out = await rl.execute({ uri: code[lang]!, handler: 'greet', input: { name: 'Ada' }, callerDid: alice.did });
        executions.push({ id: out.executionId, language: lang, status: out.status, output: out.output ?? null, failure: out.failure ?? null });
        say(`  ${out.executionId} ${out.status}: ${JSON.stringify(out.output ?? out.failure)}`);
      }

      const env = `RUNLOG_HOME=${rl.home}`;
      if (io.json) printJson(io, { inspector: server.inspectorUrl, api: server.url, home: rl.home, db: rl.dbPath, pds: net.pdsUrl, plc: net.plcUrl, instances: spawned, executions, code });
      else {
        io.out(`\nrunlog is running.\n\n  inspector   ${server.inspectorUrl}\n  log         ${rl.dbPath}\n  PDS         ${net.pdsUrl} (PLC ${net.plcUrl})\n`);
        io.out('try, in another shell:');
        io.out(`  ${env} runlog ps --all`);
        io.out(`  ${env} runlog events ${instances[0]} --follow`);
        io.out(`  ${env} runlog replay ${executions[0]!.id} --step`);
        io.out(`  ${env} runlog cap grant com.example.hello git   # every instance of the app`);
        io.out(`  ${env} runlog exec ${code.python} greet --input '{"name":"Grace"}'`);
        io.out(`  ${env} runlog logs ${instances[1]}`);
        io.out('\n(runlog is `node bin/runlog.js` in this checkout.) Ctrl-C stops the demo and everything it started.');
      }
      if (!args.values.once) {
        await new Promise<void>((resolveSignal) => {
          const keepAlive = setInterval(() => undefined, 1 << 30);
          const on = () => {
            clearInterval(keepAlive);
            process.off('SIGINT', on);
            process.off('SIGTERM', on);
            resolveSignal();
          };
          process.on('SIGINT', on);
          process.on('SIGTERM', on);
        });
      }
      return executions.every((e) => e.status === 'succeeded') ? EXIT.ok : EXIT.failure;
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
    }
  },
};
