// Inspection commands: they read the log through the store port and work with no supervisor running. This module
// imports only light code at its top: `ps` loads the store reader and nothing else; the others load the
// machines (to fold) when they run.
import { UsageError } from '../../domain/errors.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import { supervision as supervisionOf, type Supervision } from '../../domain/supervision.ts';
import { historyHeaderLine } from '../../domain/history.ts';
import type { EventStorePort } from '../../index.ts';
import type { Command, CommandArgs } from '../command.ts';
import { withInspectionLog } from '../inspection-log.ts';
import { logPages, streamPages } from '../log-pages.ts';
import { withWritableLog } from '../writable-log.ts';
import { age, EXIT, printEach, printJson, table, truncate, type Io } from '../output.ts';

function needId(args: CommandArgs, usage: string): string {
  const id = args.positionals[0];
  if (!id) throw new UsageError(`missing actor id\nusage: ${usage}`);
  return id;
}

function wholeNumber(v: unknown, name: string, min = 0): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min)
    throw new UsageError(`--${name} must be a whole number${min > 0 ? ` ≥ ${min}` : ''}, not '${String(v)}'`);
  return n;
}

const describe = (summary: Record<string, unknown>): string => {
  if (summary.appId) return `${summary.appId} (${summary.sandbox})${summary.port ? ` :${summary.port}` : ''}`;
  if (summary.uri) return `${summary.handler} ${summary.uri}`;
  return '';
};

/** What ps says under a table whose live states nobody supervises. */
export function unsupervisedNote(sup: Supervision): string {
  if (!sup.heartbeatAt)
    return 'no supervisor has run on this log: states are as last recorded (runlog serve supervises)';
  return (
    `not supervised since ${sup.since} (last heartbeat from ${sup.node} pid ${sup.pid}): ` +
    'live states are the last known, not current (runlog serve supervises)'
  );
}

export const psCommand: Command = {
  name: 'ps',
  summary: 'list actors (live ones; --all for every actor)',
  usage: 'runlog ps [--all] [--kind instance|execution] [--json]',
  options: {
    all: { type: 'boolean', short: 'a', default: false, description: 'every actor, finished ones too' },
    kind: {
      type: 'string',
      value: '<instance|execution>',
      description: 'only app instances or only executions',
      defaultText: 'both',
    },
  },
  examples: ['runlog ps --all --kind instance'],
  run: (args, io) => {
    const kind = args.values.kind as string | undefined;
    if (kind && kind !== 'instance' && kind !== 'execution')
      throw new UsageError(`--kind must be instance or execution, not '${kind}'`);
    return withInspectionLog(args, async ({ store, cluster }) => {
      const rows = await store.listActors({ all: Boolean(args.values.all), ...(kind ? { kind } : {}) });
      const sup = supervisionOf(await store.readHeartbeat(), new Date().toISOString());
      // A cluster's log (PostgreSQL) says where each actor last ran and which node owns it now (asked all at once).
      const places = cluster ? await cluster.placements(rows.map((r) => r.stream)) : new Map();
      const placed = cluster ? (r: { stream: string }) => places.get(r.stream)! : null;
      if (io.json) {
        printJson(
          io,
          rows.map((r) => ({
            id: r.id,
            kind: r.kind,
            state: r.state,
            status: r.status,
            version: r.version,
            createdAt: r.createdAt,
            updatedAt: r.updatedAt,
            summary: r.summary,
            supervised: sup.supervised,
            heartbeatAt: sup.heartbeatAt,
            archived: r.archived ?? null,
            ...(placed ? placed(r) : {}),
          })),
        );
      } else if (rows.length === 0) {
        io.err(args.values.all ? 'no actors in this log' : 'no live actors (runlog ps --all shows finished ones)');
      } else {
        // Like kubectl's NotReady: a live state nobody supervises is only the last one known.
        const mark = (r: { state: string; status: string }) =>
          !sup.supervised && r.status === 'active' ? `${r.state} (last known)` : r.state;
        const what = (r: (typeof rows)[number]) =>
          `${describe(r.summary)}${r.archived ? `${r.summary.appId || r.summary.uri ? ' ' : ''}(archived to ${r.archived.file})` : ''}`;
        if (placed) {
          const cells = (r: (typeof rows)[number]) => {
            const p = placed(r);
            return [p.node ?? '-', p.owner ?? '-'];
          };
          io.out(
            table(
              rows.map((r) => [r.id, r.kind, mark(r), ...cells(r), age(r.updatedAt), what(r)]),
              ['ID', 'KIND', 'STATE', 'NODE', 'OWNER', 'UPDATED', 'WHAT'],
            ),
          );
        } else
          io.out(
            table(
              rows.map((r) => [r.id, r.kind, mark(r), age(r.updatedAt), what(r)]),
              ['ID', 'KIND', 'STATE', 'UPDATED', 'WHAT'],
            ),
          );
        if (!sup.supervised && rows.some((r) => r.status === 'active')) io.err(unsupervisedNote(sup));
      }
      return EXIT.ok;
    });
  },
};

export const inspectCommand: Command = {
  name: 'inspect',
  summary: "show an actor's current state and context (computed by replaying its events)",
  usage: 'runlog inspect <id> [--json]',
  examples: ['runlog inspect inst_01J9Z --json'],
  run: async (args, io) => {
    const id = needId(args, inspectCommand.usage);
    const { inspectActor, actorEvents } = await import('../../inspect/inspection.ts');
    const { executionWaterfall, renderWaterfall } = await import('../../domain/latency-profile.ts');
    return withInspectionLog(args, async ({ store }) => {
      const view = await inspectActor(store, id);
      const sup = supervisionOf(await store.readHeartbeat(), new Date().toISOString());
      // An execution's latency waterfall, from its events (phases) and its outcome's profile (steps).
      const waterfall = view.kind === 'execution' ? executionWaterfall(await actorEvents(store, view.id)) : null;
      if (io.json) printJson(io, { ...view, supervision: sup, ...(waterfall ? { waterfall } : {}) });
      else {
        const last = !sup.supervised && view.status === 'active' ? ' — last known state' : '';
        io.out(
          `${view.kind} ${view.id}\nstate:   ${view.state} (${view.status})${last}\nversion: ${view.version}\n` +
            `created: ${view.createdAt}\nupdated: ${view.updatedAt}`,
        );
        if (view.archived)
          io.out(
            `archived: ${view.archived.at} to ${view.archived.file}\n` +
              `          its events are there: runlog replay --file ${view.archived.file} ${view.id}`,
          );
        const supervised = sup.supervised
          ? `yes (${sup.node} pid ${sup.pid}, heartbeat ${sup.heartbeatAt})`
          : `no${sup.since ? ` since ${sup.since}` : ' (no supervisor has run on this log)'}`;
        io.out(`supervised: ${supervised}`);
        if (waterfall && waterfall.length > 0)
          io.out(
            `latency (ms from the request):\n${renderWaterfall(waterfall)
              .map((l) => `  ${l}`)
              .join('\n')}`,
          );
        io.out(`context:\n${JSON.stringify(view.context, null, 2)}`);
      }
      return EXIT.ok;
    });
  },
};

function formatEvent(e: RecordedEvent): string {
  return `${String(e.seq).padStart(6)}  ${e.stream}  v${e.version}  ${e.at}  ${e.type}  ${truncate(JSON.stringify(e.data), 160)}`;
}

const formatLine = (io: Io, e: RecordedEvent): string => (io.json ? JSON.stringify(e) : formatEvent(e));
const printEvent = (io: Io, e: RecordedEvent): void => io.out(formatLine(io, e));

/** Resolves on SIGINT/SIGTERM, when stdout's reader goes away, or when `done` is called. */
function untilStopped(io: Io): { done: () => void; stopped: Promise<void> } {
  let done!: () => void;
  const stopped = new Promise<void>((resolve) => {
    const keepAlive = setInterval(() => undefined, 1 << 30);
    const offClosed = io.onClosed?.(() => done());
    done = () => {
      clearInterval(keepAlive);
      offClosed?.();
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      resolve();
    };
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
  return { done, stopped };
}

export const eventsCommand: Command = {
  name: 'events',
  streams: true,
  summary: "print an actor's events (or the whole log with --all) as they are read; --follow tails it",
  usage: 'runlog events <id> | --all [--from N] [--to N] [--follow] [--json]',
  options: {
    all: { type: 'boolean', default: false, description: 'the whole log in seq order (--from/--to are then seqs)' },
    from: {
      type: 'string',
      value: '<N>',
      description: 'first version to print (with --all: print seqs after N)',
      defaultText: 'the first',
    },
    to: {
      type: 'string',
      value: '<N>',
      description: 'last version (with --all: seq) to print; --follow ends there',
      defaultText: 'the last',
    },
    follow: {
      type: 'boolean',
      short: 'f',
      default: false,
      description:
        'keep printing new events (also written by other processes); ends at --to, or when the actor has ended',
    },
  },
  examples: ['runlog events inst_01J9Z --follow', 'runlog events --all --json | head -1'],
  run: async (args, io) => {
    const all = Boolean(args.values.all);
    const id = args.positionals[0];
    if (!all && !id) throw new UsageError(`give an actor id or --all\nusage: ${eventsCommand.usage}`);
    if (all && id) throw new UsageError(`give an actor id or --all, not both\nusage: ${eventsCommand.usage}`);
    const from = wholeNumber(args.values.from, 'from');
    const to = wholeNumber(args.values.to, 'to');
    const follow = Boolean(args.values.follow);
    // Resolving an (abbreviated) id reads the store alone: no machines are loaded before the first line.
    const resolve = all ? undefined : (await import('../../inspect/resolve-actor.ts')).resolveActor;
    return withInspectionLog(
      args,
      async ({ store }) => {
        // --all: positions are seqs; one actor: versions. Either way a row is printed as soon as it is read.
        const ref = resolve ? await resolve(store, id!) : undefined;
        const startSeq = await store.lastSeq(); // where --follow picks up, at the latest
        let lastSeq = all ? (from ?? 0) : 0;
        let lastVersion = all ? 0 : Math.max(0, (from ?? 1) - 1);
        const rows = ref ? streamPages(store, ref.stream, from ?? 1, to) : logPages(store, (from ?? 0) + 1, to);
        const printed = await printEach(
          io,
          rows,
          (e) => formatLine(io, e),
          (e) => {
            lastSeq = e.seq;
            lastVersion = e.version;
          },
        );
        if (!printed || !follow || io.closed) return EXIT.ok;
        const reachedTo = (): boolean => to !== undefined && (all ? lastSeq >= to : lastVersion >= to);
        // Ended: the actor is terminal and every event up to that point has been printed (a writer may have committed
        // the final events already while we print the ones before them).
        const ended = async (): Promise<boolean> => {
          const row = ref ? await store.getActor(ref.id) : undefined;
          return row !== undefined && row.status === 'terminal' && lastVersion >= row.version;
        };
        if (reachedTo() || (await ended())) return EXIT.ok;
        await followLog(
          io,
          store,
          { afterSeq: Math.max(lastSeq, all ? 0 : startSeq), ...(ref ? { stream: ref.stream } : {}) },
          async (e, stop) => {
            if (all ? e.seq <= lastSeq : e.version <= lastVersion) return; // already printed by the catch-up
            if (to !== undefined && (all ? e.seq > to : e.version > to)) return stop();
            printEvent(io, e);
            lastSeq = e.seq;
            lastVersion = e.version;
            if (reachedTo() || io.closed || (await ended())) stop();
          },
        );
        return EXIT.ok;
      },
      follow,
    );
  },
};

/** Tails the log until the handler calls stop, a signal arrives, stdout's reader goes away or the tail fails. */
async function followLog(
  io: Io,
  store: EventStorePort,
  from: { afterSeq: number; stream?: string },
  onEvent: (e: RecordedEvent, stop: () => void) => Promise<void>,
): Promise<void> {
  const { done, stopped } = untilStopped(io);
  let over = false;
  let failed: { error: unknown } | null = null;
  const stop = (): void => {
    over = true;
    done();
  };
  const sub = store.subscribe(
    {
      from: from.afterSeq + 1,
      ...(from.stream ? { stream: from.stream } : {}),
      pollMs: 100,
      onError: (error) => {
        failed = { error };
        stop();
      },
    },
    async (e) => {
      if (!over) await onEvent(e, stop);
    },
  );
  try {
    await stopped;
  } finally {
    await sub.close();
  }
  if (failed) throw (failed as { error: unknown }).error;
}

export const replayCommand: Command = {
  name: 'replay',
  streams: true,
  summary:
    'replay an actor through its machine (from the log, or offline from an exported --file): ' +
    'each transition, or state and context at --to N',
  usage: 'runlog replay <id> | --file <history.jsonl | archive.jsonl.gz> [<id>] [--to <version>] [--step] [--json]',
  options: {
    to: {
      type: 'string',
      value: '<version>',
      description: 'stop at this version and print the state and context there',
      defaultText: 'the last',
    },
    step: {
      type: 'boolean',
      default: false,
      description: 'a block per transition: effects that ran live and what changed in the context',
    },
    file: {
      type: 'string',
      value: '<history.jsonl>',
      description:
        'replay a history written by runlog export, or an actor of an archive written by runlog archive ' +
        '(gzip; name the actor): no database is opened',
    },
  },
  examples: [
    'runlog replay exec_01J9Z --step',
    'runlog replay --file history.jsonl --to 3',
    'runlog replay --file ~/.runlog/archives/runlog-2026-11-01.jsonl.gz exec_01J9Z',
  ],
  run: async (args, io) => {
    const file = args.values.file as string | undefined;
    const step = Boolean(args.values.step);
    let to: number | undefined;
    if (args.values.to !== undefined) {
      to = Number(args.values.to);
      if (!Number.isInteger(to) || to < 1) throw new UsageError('--to must be a version number ≥ 1');
    }
    const debug = await import('../replay-stepper.ts');
    if (file !== undefined) {
      // Offline: no database is opened, nothing runs; the file's events go through the upcasters.
      if (args.positionals.length > 1)
        throw new UsageError(
          `--file takes at most one actor id (the actor to replay from an archive)\nusage: ${replayCommand.usage}`,
        );
      const id = args.positionals[0];
      await debug.replayHistoryFile(io, file, { step, to, ...(id !== undefined ? { id } : {}) });
      return EXIT.ok;
    }
    const id = needId(args, replayCommand.usage);
    await withInspectionLog(args, ({ store }) => debug.replayFromLog(io, store, id, { step, to }));
    return EXIT.ok;
  },
};

export const exportCommand: Command = {
  name: 'export',
  streams: true,
  summary: "write an actor's history as JSON lines (a header, then one recorded event per line)",
  usage: 'runlog export <id> > history.jsonl   (replay it anywhere with: runlog replay --file history.jsonl)',
  examples: ['runlog export inst_01J9Z > history.jsonl'],
  run: async (args, io) => {
    const id = needId(args, exportCommand.usage);
    if (args.positionals.length > 1) throw new UsageError(`export takes one actor id\nusage: ${exportCommand.usage}`);
    const { resolveActor } = await import('../../inspect/resolve-actor.ts');
    return withInspectionLog(args, async ({ store }) => {
      const ref = await resolveActor(store, id);
      const version = await store.streamVersion(ref.stream);
      io.out(historyHeaderLine({ ...ref, version }, new Date().toISOString()));
      let n = 0;
      // Read a page at a time up to the version in the header: the file always agrees with its header.
      if (
        !(await printEach(
          io,
          streamPages(store, ref.stream, 1, version),
          (e) => JSON.stringify(e),
          () => (n += 1),
        ))
      )
        return EXIT.ok;
      io.err(`exported ${n} events of ${ref.kind} ${ref.id}`);
      return EXIT.ok;
    });
  },
};

export const rebuildCommand: Command = {
  name: 'rebuild',
  summary: 'drop and recompute the actors projection (or, with --snapshots, the snapshots) from the events',
  usage: 'runlog rebuild [--snapshots] [--json]',
  options: {
    snapshots: {
      type: 'boolean',
      default: false,
      description: "recompute every actor's snapshot instead (a cache: only speed changes)",
    },
  },
  examples: ['runlog rebuild', 'runlog rebuild --snapshots'],
  run: async (args, io) => {
    const { rebuildProjection, rebuildSnapshots } = await import('../../inspect/inspection.ts');
    return withWritableLog(args, 'runlog rebuild', async (log) => {
      if (args.values.snapshots === true) {
        const r = await rebuildSnapshots(log.store, log.snapshots);
        if (io.json) printJson(io, r);
        else io.out(`rebuilt ${r.snapshots} snapshots from ${r.events} events`);
        return EXIT.ok;
      }
      const r = await rebuildProjection(log.store);
      if (io.json) printJson(io, r);
      else io.out(`rebuilt ${r.actors} actors from ${r.events} events`);
      return EXIT.ok;
    });
  },
};
