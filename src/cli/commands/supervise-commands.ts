// Commands that change things. Instances live as long as their supervisor, so spawn/stop/kill/cap/logs
// talk to `runlog serve` over its API; exec runs through it when one is running, else in this process.
// Only light modules at the top (see command.ts): the client and the library load when a command runs.
import { resolve } from 'node:path';
import type { ActorView } from '../../inspect/inspection.ts';
import { resolvePaths } from '../../config/paths.ts';
import type { AppToolsView, ExecutionOutcome, LogLine } from '../../supervisor/runlog.ts';
import type { InstanceContext } from '../../index.ts';
import type { ReconcileReport } from '../../supervisor/recovery/reconcile-run.ts';
import { UsageError } from '../../domain/errors.ts';
import { assertNodeChoice, NODE_NAME } from '../../domain/placement.ts';
import { ANSWERS } from '../api-answers.ts';
import type { Command, CommandArgs } from '../command.ts';
import { EXIT, printJson, type Io } from '../output.ts';
import { requestTimeout, timeoutFlag } from '../request-timeout.ts';

/** How long each command waits for the supervisor unless told (--timeout): a bit past the supervisor's own bound. */
const WAIT_MS = {
  spawn: 120_000,
  stopPastGrace: 60_000,
  kill: 60_000,
  cap: 60_000,
  reconcile: 300_000,
  execRun: 600_000,
  execPastRun: 60_000,
} as const;

const client = () => import('../client.ts');

const homeOf = (args: CommandArgs) => resolvePaths({ home: args.home, db: args.db }).home;

function printActor(io: Io, view: ActorView, verb: string): void {
  if (io.json) printJson(io, view);
  else {
    const c = view.context as InstanceContext;
    const where = c.host && c.port ? ` at http://${c.host}:${c.port}` : '';
    io.out(`${view.id}  ${view.state}${where}`);
    io.err(`runlog: ${verb} ${view.id} (${view.kind}); runlog inspect ${view.id} | runlog events ${view.id}`);
  }
}

export const spawnCommand: Command = {
  name: 'spawn',
  summary: 'spawn an app instance from an app directory (needs `runlog serve`)',
  usage:
    'runlog spawn <app-dir> [--sandbox proot|container] [--id <instance-id>] [--node <name>|any] [--timeout <ms>] [--json]',
  options: {
    sandbox: {
      type: 'string',
      value: '<proot|container>',
      description: "overrides the manifest's sandbox",
      defaultText: "the manifest's, else proot",
    },
    id: {
      type: 'string',
      value: '<instance-id>',
      description: 'the new instance id',
      defaultText: 'a fresh inst_<ULID>',
    },
    node: {
      type: 'string',
      value: '<name|any>',
      description:
        "the cluster node it runs on (any: the live node with the fewest live instances); the app directory must exist on that node's host",
      defaultText: 'the node that serves this home',
    },
    timeout: timeoutFlag(String(WAIT_MS.spawn)),
  },
  examples: ['runlog spawn examples/hello-app --sandbox container', 'runlog spawn examples/hello-app --node any'],
  async run(args, io) {
    const dir = args.positionals[0];
    if (!dir) throw new UsageError(`missing app directory\nusage: ${spawnCommand.usage}`);
    const sandbox = args.values.sandbox as string | undefined;
    if (sandbox !== undefined && sandbox !== 'proot' && sandbox !== 'container')
      throw new UsageError(`--sandbox must be proot or container, not '${sandbox}'`);
    const node = args.values.node as string | undefined;
    if (node !== undefined && !NODE_NAME.test(node))
      throw new UsageError(
        `--node must be 'any' or a node name (letters, digits, '.', '_' or '-', at most 63), not '${node}'`,
      );
    const timeoutMs = requestTimeout(args, WAIT_MS.spawn);
    const { callApi, requireServer } = await client();
    const server = requireServer(homeOf(args));
    const body = {
      appDir: resolve(dir),
      ...(sandbox ? { sandbox } : {}),
      ...(args.values.id ? { instanceId: args.values.id } : {}),
      ...(node ? { node } : {}),
    };
    const view = await callApi<ActorView>(server, 'POST', '/api/instances', body, ANSWERS.actor, timeoutMs);
    printActor(io, view, 'spawned');
    return EXIT.ok;
  },
};

const needId = (args: CommandArgs, usage: string): string => {
  const id = args.positionals[0];
  if (!id) throw new UsageError(`missing instance id\nusage: ${usage}`);
  return id;
};

export const stopCommand: Command = {
  name: 'stop',
  summary:
    'stop an instance gracefully (onStop, SIGTERM, SIGKILL after the grace period); stopping a stopped one succeeds',
  usage: 'runlog stop <id> [--grace <ms>] [--timeout <ms>] [--json]',
  options: {
    grace: {
      type: 'string',
      value: '<ms>',
      description: 'how long to wait after SIGTERM before SIGKILL',
      defaultText: '5000',
    },
    timeout: timeoutFlag(`the grace period + ${WAIT_MS.stopPastGrace}`),
  },
  examples: ['runlog stop inst_01J9Z --grace 10000'],
  async run(args, io) {
    const id = needId(args, stopCommand.usage);
    const grace = args.values.grace === undefined ? undefined : Number(args.values.grace);
    if (grace !== undefined && (!Number.isInteger(grace) || grace < 0))
      throw new UsageError('--grace must be milliseconds (a whole number)');
    const timeoutMs = requestTimeout(args, (grace ?? 5000) + WAIT_MS.stopPastGrace);
    const { callApi, requireServer } = await client();
    const view = await callApi<ActorView>(
      requireServer(homeOf(args)),
      'POST',
      `/api/actors/${encodeURIComponent(id)}/stop`,
      grace === undefined ? {} : { graceMs: grace },
      ANSWERS.actor,
      timeoutMs,
    );
    printActor(io, view, 'stopped');
    return EXIT.ok;
  },
};

export const killCommand: Command = {
  name: 'kill',
  summary: 'kill an instance now (SIGKILL)',
  usage: 'runlog kill <id> [--timeout <ms>] [--json]',
  options: { timeout: timeoutFlag(String(WAIT_MS.kill)) },
  examples: ['runlog kill inst_01J9Z'],
  async run(args, io) {
    const id = needId(args, killCommand.usage);
    const timeoutMs = requestTimeout(args, WAIT_MS.kill);
    const { callApi, requireServer } = await client();
    const view = await callApi<ActorView>(
      requireServer(homeOf(args)),
      'POST',
      `/api/actors/${encodeURIComponent(id)}/kill`,
      {},
      ANSWERS.actor,
      timeoutMs,
    );
    printActor(io, view, 'killed');
    return EXIT.ok;
  },
};

export const capCommand: Command = {
  name: 'cap',
  summary: 'grant or revoke a tool for an app: every running instance of it at once (no respawn) and every later spawn',
  usage: 'runlog cap grant|revoke <app-id> <tool> [--timeout <ms>] [--json]',
  options: { timeout: timeoutFlag(String(WAIT_MS.cap)) },
  examples: ['runlog cap grant com.example.hello git'],
  async run(args, io) {
    const [verb, appId, tool] = args.positionals;
    if ((verb !== 'grant' && verb !== 'revoke') || !appId || !tool) throw new UsageError(`usage: ${capCommand.usage}`);
    const timeoutMs = requestTimeout(args, WAIT_MS.cap);
    const { callApi, requireServer } = await client();
    const server = requireServer(homeOf(args));
    const r =
      verb === 'grant'
        ? await callApi<AppToolsView>(
            server,
            'POST',
            `/api/apps/${encodeURIComponent(appId)}/tools`,
            { tool },
            ANSWERS.appTools,
            timeoutMs,
          )
        : await callApi<AppToolsView>(
            server,
            'DELETE',
            `/api/apps/${encodeURIComponent(appId)}/tools/${encodeURIComponent(tool)}`,
            undefined,
            ANSWERS.appTools,
            timeoutMs,
          );
    if (io.json) printJson(io, r);
    else {
      io.out(`${r.appId}  tools: ${r.tools.join(', ') || '(none)'}`);
      const later =
        verb === 'grant' ? 'every later spawn of the app gets it too' : 'later spawns of the app start without it';
      io.err(
        `runlog: ${verb === 'grant' ? 'granted' : 'revoked'} ${tool} for app ${r.appId}: ${capSummary(r)}; ${later}`,
      );
    }
    return EXIT.ok;
  },
};

/** What a `cap` change reached, per node, and what is recorded but not applied yet (honest about both). */
export function capSummary(r: AppToolsView): string {
  const changed = r.changed ?? r.instances.map((instanceId) => ({ instanceId, node: '' }));
  const pending = r.pending ?? [];
  const byNode = new Map<string, string[]>();
  for (const c of changed) byNode.set(c.node, [...(byNode.get(c.node) ?? []), c.instanceId]);
  const perNode = [...byNode].map(([node, ids]) => (node ? `${ids.join(', ')} on ${node}` : ids.join(', ')));
  const parts = [
    changed.length === 0
      ? 'no running instance changed'
      : `${changed.length} running instance${changed.length === 1 ? '' : 's'} changed (${perNode.join('; ')})`,
  ];
  if (pending.length > 0) {
    const notYet = pending.map((p) => `${p.instanceId}${p.node ? ` on ${p.node}` : ''}`).join(', ');
    parts.push(
      `${pending.length} not yet (${notYet}): recorded, their owner applies it (or the node that takes them over)`,
    );
  }
  return parts.join('; ');
}

export const logsCommand: Command = {
  name: 'logs',
  summary: "an instance's output (buffered lines; --follow streams until it exits)",
  usage: 'runlog logs <id> [--follow] [--json]   (--json prints one JSON line per output line)',
  options: {
    follow: { type: 'boolean', short: 'f', default: false, description: 'keep streaming until the instance exits' },
  },
  examples: ['runlog logs inst_01J9Z --follow'],
  async run(args, io) {
    const id = needId(args, logsCommand.usage);
    const { apiError, requireServer } = await client();
    const server = requireServer(homeOf(args));
    const path = `/api/actors/${encodeURIComponent(id)}/logs${args.values.follow ? '?follow=1' : ''}`;
    const res = await fetch(new URL(path, server.url), {
      headers: { authorization: `Bearer ${server.token}` },
    });
    if (!res.ok || !res.body) throw apiError(res.status, await res.text(), 'GET', path, server.url); // the supervisor's typed error
    let buf = '';
    // why: Node's web ReadableStream is async-iterable; the DOM lib type does not say so
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      if (io.closed) break; // nobody reads our output any more
      buf += Buffer.from(chunk).toString('utf8');
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line) continue;
        // The supervisor's typed error past the first line (a follow of another node's instance lost: FOLLOW_LOST).
        if (line.startsWith('{"error":')) throw apiError(res.status, line, 'GET', path, server.url);
        if (io.json) io.out(line);
        else {
          const l = JSON.parse(line) as LogLine;
          (l.stream === 'stderr' ? io.err : io.out)(l.line);
        }
      }
    }
    return EXIT.ok;
  },
};

export const execCommand: Command = {
  name: 'exec',
  summary: 'run at-run code: resolve it from its PDS, run the handler, print the output',
  usage:
    "runlog exec <at-uri> <handler> [--input '<json>'] [--timeout <ms>] [--caller <did>] [--node <name>|any] " +
    '[--node-wait <ms>] [--wait <ms>] [--plc <url>] [--json]',
  options: {
    input: { type: 'string', value: "'<json>'", description: "the handler's input, as JSON", defaultText: 'null' },
    timeout: {
      type: 'string',
      value: '<ms>',
      description: 'deadline of the run',
      defaultText: "the code record's, clamped by the operator policy",
    },
    caller: {
      type: 'string',
      value: '<did>',
      description: 'the DID the execution runs on behalf of (recorded, passed to the handler)',
      defaultText: 'none',
    },
    node: {
      type: 'string',
      value: '<name|any>',
      description: 'on a cluster: only this node may claim it from the queue (any: the first live node with room)',
      defaultText: 'the node that takes the call first, others when it is full',
    },
    'node-wait': {
      type: 'string',
      value: '<ms>',
      description:
        'with --node <name>: how long to wait for that node while it is not live (dead, paused, stopped); ' +
        'past it the answer is NODE_UNAVAILABLE and it never runs there',
      defaultText: '0: NODE_UNAVAILABLE at once',
    },
    wait: timeoutFlag(
      `--timeout + --node-wait + ${WAIT_MS.execPastRun / 1000} s; ` +
        `without --timeout, ${(WAIT_MS.execRun + WAIT_MS.execPastRun) / 60_000} min`,
    ),
    plc: {
      type: 'string',
      value: '<url>',
      description: 'PLC directory for DID resolution (when no supervisor runs)',
      defaultText: '$RUNLOG_PLC_URL, else https://plc.directory',
    },
  },
  examples: ['runlog exec at://did:plc:abc/dev.mainasara.at-run.beta.v2.code/greet greet --input \'{"name":"Ada"}\''],
  async run(args, io) {
    const [uri, handler] = args.positionals;
    if (!uri || !handler) throw new UsageError(`usage: ${execCommand.usage}`);
    let input: unknown = null;
    if (args.values.input !== undefined) {
      try {
        input = JSON.parse(String(args.values.input));
      } catch (err) {
        throw new UsageError(`--input is not JSON: ${(err as Error).message}`);
      }
    }
    const timeoutMs = args.values.timeout === undefined ? undefined : Number(args.values.timeout);
    if (timeoutMs !== undefined && (!Number.isInteger(timeoutMs) || timeoutMs <= 0))
      throw new UsageError('--timeout must be milliseconds (a whole number)');
    const node = args.values.node as string | undefined;
    // NODE_INVALID; an unknown or dead node: the supervisor's NODE_UNKNOWN / NODE_UNAVAILABLE
    if (node !== undefined) assertNodeChoice(node);
    const nodeWaitMs = args.values['node-wait'] === undefined ? undefined : Number(args.values['node-wait']);
    if (
      nodeWaitMs !== undefined &&
      (!Number.isSafeInteger(nodeWaitMs) || nodeWaitMs < 0 || node === undefined || node === 'any')
    )
      throw new UsageError('--node-wait must be milliseconds (a whole number), with --node <name>');
    const request = {
      uri,
      handler,
      input,
      ...(timeoutMs ? { timeoutMs } : {}),
      ...(args.values.caller ? { callerDid: String(args.values.caller) } : {}),
      ...(node !== undefined ? { node } : {}),
      ...(nodeWaitMs !== undefined ? { nodeWaitMs } : {}),
    };
    // The run's own deadline bounds the supervisor's answer; past it (and a margin) the supervisor is not answering.
    const waitMs = requestTimeout(
      args,
      (timeoutMs ?? WAIT_MS.execRun) + (nodeWaitMs ?? 0) + WAIT_MS.execPastRun,
      'wait',
    );
    const { atprotoOptions, callApi, findServer } = await client();
    const server = findServer(homeOf(args));
    let outcome: ExecutionOutcome;
    if (server) {
      io.err(`runlog: running through the supervisor at ${server.url}`);
      outcome = await callApi<ExecutionOutcome>(server, 'POST', '/api/executions', request, ANSWERS.execution, waitMs);
    } else {
      const { createRunlog } = await import('../../supervisor/runlog.ts');
      const rl = await createRunlog({
        home: args.home,
        db: args.db,
        ...(args.store ? { store: args.store } : {}),
        command: 'runlog exec',
        atproto: atprotoOptions(args.values.plc as string | undefined),
        log: (m) => io.err(`runlog: ${m}`),
        watchApps: false,
      });
      try {
        outcome = await rl.execute({
          ...request,
          onProgress: (s) =>
            io.err(
              `runlog: ${s.name}${s.detail.ms !== undefined && s.detail.ms !== null ? ` (${s.detail.ms} ms)` : ''}`,
            ),
        });
      } finally {
        await rl.close();
      }
    }
    if (io.json) printJson(io, outcome);
    else if (outcome.status === 'succeeded') io.out(JSON.stringify(outcome.output, null, 2));
    else
      io.err(
        `runlog: ${outcome.executionId} failed (${outcome.failure?.reason}): ${outcome.failure?.code}: ${outcome.failure?.message}`,
      );
    return outcome.status === 'succeeded' ? EXIT.ok : EXIT.failure;
  },
};

export const reconcileCommand: Command = {
  name: 'reconcile',
  summary: 'compare the log with Docker and record what is found (--dry-run: only report)',
  usage: 'runlog reconcile [--dry-run] [--timeout <ms>] [--json]',
  options: {
    'dry-run': { type: 'boolean', default: false, description: 'only report what would be recorded' },
    timeout: timeoutFlag(`${WAIT_MS.reconcile} (through a running supervisor only)`),
  },
  examples: ['runlog reconcile --dry-run'],
  async run(args, io) {
    const dryRun = Boolean(args.values['dry-run']);
    const timeoutMs = requestTimeout(args, WAIT_MS.reconcile);
    const { callApi, findServer } = await client();
    const server = findServer(homeOf(args));
    let report: ReconcileReport;
    if (server)
      report = await callApi<ReconcileReport>(
        server,
        'POST',
        '/api/reconcile',
        { dryRun },
        ANSWERS.reconcile,
        timeoutMs,
      );
    else {
      // No supervisor: this process reconciles (at open) — or, for a dry run, only looks.
      const { createRunlog } = await import('../../supervisor/runlog.ts');
      const rl = await createRunlog({
        home: args.home,
        db: args.db,
        ...(args.store ? { store: args.store } : {}),
        command: 'runlog reconcile',
        reconcile: false,
        watchApps: false,
        log: (m) => io.err(`runlog: ${m}`),
      });
      try {
        report = await rl.reconcile({ dryRun });
      } finally {
        await rl.close();
      }
    }
    if (io.json) printJson(io, report);
    else {
      for (const a of report.actions)
        io.out(
          `${dryRun ? 'would record' : 'recorded'} ${a.action.padEnd(9)} ${a.kind} ${a.id}  ${JSON.stringify(a.evidence)}`,
        );
      for (const u of report.unreachable) io.err(`runlog: unreachable: ${u}`);
      if (report.actions.length === 0) io.err('runlog: the log and Docker agree');
    }
    return report.unreachable.length > 0 ? EXIT.failure : EXIT.ok;
  },
};
