// Inspection commands: they read the SQLite file directly and work with no supervisor running.
import { createRunlog, type Runlog } from '../../actors/runlog.ts';
import { UsageError } from '../../domain/errors.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import type { Supervision } from '../../domain/supervision.ts';
import type { Command, CommandArgs } from '../command.ts';
import { age, EXIT, printJson, table, truncate, type Io } from '../output.ts';
import { printReplay, readHistoryFile, replayHistory } from './debug-commands.ts';

/** Opens the log read-only (never creates or changes a file); `write` takes the writer lock instead (rebuild). */
async function withLog<T>(args: CommandArgs, fn: (rl: Runlog) => Promise<T> | T, write?: { command: string }): Promise<T> {
  const rl = await createRunlog({ home: args.home, db: args.db, supervise: false, ...(write ? { readOnly: false, command: write.command } : {}) });
  try {
    return await fn(rl);
  } finally {
    await rl.close();
  }
}

function needId(args: CommandArgs, usage: string): string {
  const id = args.positionals[0];
  if (!id) throw new UsageError(`missing actor id\nusage: ${usage}`);
  return id;
}

const describe = (summary: Record<string, unknown>): string => {
  if (summary.appId) return `${summary.appId} (${summary.sandbox})${summary.port ? ` :${summary.port}` : ''}`;
  if (summary.uri) return `${summary.handler} ${summary.uri}`;
  return '';
};

/** What ps says under a table whose live states nobody supervises. */
export function unsupervisedNote(sup: Supervision): string {
  if (!sup.heartbeatAt) return 'no supervisor has run on this log: states are as last recorded (runlog serve supervises)';
  return `not supervised since ${sup.since} (last heartbeat from ${sup.node} pid ${sup.pid}): live states are the last known, not current (runlog serve supervises)`;
}

export const psCommand: Command = {
  name: 'ps',
  summary: 'list actors (live ones; --all for every actor)',
  usage: 'runlog ps [--all] [--kind instance|execution] [--json]',
  options: { all: { type: 'boolean', short: 'a', default: false }, kind: { type: 'string' } },
  run: (args, io) =>
    withLog(args, (rl) => {
      const kind = args.values.kind as string | undefined;
      if (kind && kind !== 'instance' && kind !== 'execution') throw new UsageError(`--kind must be instance or execution, not '${kind}'`);
      const rows = rl.list({ all: Boolean(args.values.all), ...(kind ? { kind: kind as 'instance' | 'execution' } : {}) });
      const sup = rl.supervision();
      if (io.json) {
        printJson(
          io,
          rows.map((r) => ({ id: r.id, kind: r.kind, state: r.state, status: r.status, version: r.version, createdAt: r.createdAt, updatedAt: r.updatedAt, summary: r.summary, supervised: sup.supervised, heartbeatAt: sup.heartbeatAt })),
        );
      } else if (rows.length === 0) {
        io.err(args.values.all ? 'no actors in this log' : 'no live actors (runlog ps --all shows finished ones)');
      } else {
        // Like kubectl's NotReady: a live state nobody supervises is only the last one known.
        const mark = (r: { state: string; status: string }) => (!sup.supervised && r.status === 'active' ? `${r.state} (last known)` : r.state);
        io.out(table(rows.map((r) => [r.id, r.kind, mark(r), age(r.updatedAt), describe(r.summary)]), ['ID', 'KIND', 'STATE', 'UPDATED', 'WHAT']));
        if (!sup.supervised && rows.some((r) => r.status === 'active')) io.err(unsupervisedNote(sup));
      }
      return EXIT.ok;
    }),
};

export const inspectCommand: Command = {
  name: 'inspect',
  summary: "show an actor's current state and context (computed by replaying its events)",
  usage: 'runlog inspect <id> [--json]',
  run: (args, io) =>
    withLog(args, (rl) => {
      const view = rl.inspect(needId(args, inspectCommand.usage));
      const sup = rl.supervision();
      if (io.json) printJson(io, { ...view, supervision: sup });
      else {
        const last = !sup.supervised && view.status === 'active' ? ' — last known state' : '';
        io.out(`${view.kind} ${view.id}\nstate:   ${view.state} (${view.status})${last}\nversion: ${view.version}\ncreated: ${view.createdAt}\nupdated: ${view.updatedAt}`);
        io.out(`supervised: ${sup.supervised ? `yes (${sup.node} pid ${sup.pid}, heartbeat ${sup.heartbeatAt})` : `no${sup.since ? ` since ${sup.since}` : ' (no supervisor has run on this log)'}`}`);
        io.out(`context:\n${JSON.stringify(view.context, null, 2)}`);
      }
      return EXIT.ok;
    }),
};

function formatEvent(e: RecordedEvent): string {
  return `${String(e.seq).padStart(6)}  ${e.stream}  v${e.version}  ${e.at}  ${e.type}  ${truncate(JSON.stringify(e.data), 160)}`;
}

function printEvents(io: Io, events: RecordedEvent[]): void {
  for (const e of events) io.out(io.json ? JSON.stringify(e) : formatEvent(e));
}

export const eventsCommand: Command = {
  name: 'events',
  summary: "print an actor's events (or the whole log with --all); --follow tails it",
  usage: 'runlog events <id> | --all [--from N] [--to N] [--follow] [--json]   (--json prints one JSON event per line)',
  options: { all: { type: 'boolean', default: false }, follow: { type: 'boolean', short: 'f', default: false }, from: { type: 'string' }, to: { type: 'string' } },
  run: async (args, io) => {
    const all = Boolean(args.values.all);
    const id = args.positionals[0];
    if (!all && !id) throw new UsageError(`give an actor id or --all\nusage: ${eventsCommand.usage}`);
    const num = (v: unknown, name: string) => {
      if (v === undefined) return undefined;
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${name} must be a whole number`);
      return n;
    };
    const from = num(args.values.from, 'from');
    const to = num(args.values.to, 'to');
    const rl = await createRunlog({ home: args.home, db: args.db, supervise: false });
    try {
      let stream: string | undefined;
      let last = 0;
      if (all) {
        const evs = rl.store.readAll({ afterSeq: from ?? 0 }).filter((e) => to === undefined || e.seq <= to);
        printEvents(io, evs);
        last = evs.at(-1)?.seq ?? from ?? 0;
      } else {
        const evs = rl.events(id!, { ...(from !== undefined ? { from } : {}), ...(to !== undefined ? { to } : {}) });
        stream = rl.inspect(id!).stream;
        printEvents(io, evs);
        last = rl.store.lastSeq();
      }
      if (!args.values.follow) return EXIT.ok;
      await new Promise<void>((resolve) => {
        const off = rl.store.subscribe({ afterSeq: last, ...(stream ? { stream } : {}), pollMs: 100 }, (e) => printEvents(io, [e]));
        const keepAlive = setInterval(() => undefined, 1 << 30);
        const stop = () => {
          off();
          clearInterval(keepAlive);
          resolve();
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
      return EXIT.ok;
    } finally {
      await rl.close();
    }
  },
};

export const replayCommand: Command = {
  name: 'replay',
  summary: 'replay an actor through its machine (from the log, or offline from an exported --file): each transition, or state and context at --to N',
  usage: 'runlog replay <id> | --file <history.jsonl> [--to <version>] [--step] [--json]',
  options: { to: { type: 'string' }, step: { type: 'boolean', default: false }, file: { type: 'string' } },
  run: async (args, io) => {
    const file = args.values.file as string | undefined;
    const step = Boolean(args.values.step);
    let to: number | undefined;
    if (args.values.to !== undefined) {
      to = Number(args.values.to);
      if (!Number.isInteger(to) || to < 1) throw new UsageError('--to must be a version number ≥ 1');
    }
    if (file !== undefined) {
      // Offline: no database is opened, nothing runs; the file's events go through the upcasters.
      if (args.positionals.length > 0) throw new UsageError(`give an actor id or --file, not both\nusage: ${replayCommand.usage}`);
      const view = replayHistory(readHistoryFile(file), to === undefined ? {} : { to });
      printReplay(io, view, { step, to });
      return EXIT.ok;
    }
    return withLog(args, (rl) => {
      const id = needId(args, replayCommand.usage);
      const view = rl.replay(id, to === undefined ? {} : { to });
      printReplay(io, view, { step, to });
      return EXIT.ok;
    });
  },
};

export const rebuildCommand: Command = {
  name: 'rebuild',
  summary: 'drop and recompute the actors projection from the events',
  usage: 'runlog rebuild [--json]',
  run: (args, io) =>
    withLog(args, (rl) => {
      const r = rl.rebuild();
      if (io.json) printJson(io, r);
      else io.out(`rebuilt ${r.actors} actors from ${r.events} events`);
      return EXIT.ok;
    }, { command: 'runlog rebuild' }),
};
