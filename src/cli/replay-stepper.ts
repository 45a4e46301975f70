// The replay stepper: `runlog replay --file history.jsonl` replays a history offline (no database, no side effects),
// `runlog replay <id>` from the log; `--step` prints every transition with the effects that ran live and what
// changed in the context. Replays stream: a file is read line by line (twice: checked whole first, so a bad file
// prints nothing, then folded and printed), and only the current state is held, never the history or its steps.
import { statSync } from 'node:fs';
import { replayEvents, resolveActor, type ReplayView } from '../inspect/inspection.ts';
import type { EventStorePort } from '../index.ts';
import { decodeSnapshot } from '../inspect/snapshots.ts';
import { NotFoundError, ReplayError, ReplayToInvalidError, ValidationError } from '../domain/errors.ts';
import {
  rejectedType,
  toMachineEvent,
  type ActorKind,
  type MachineEvent,
  type RecordedEvent,
} from '../domain/events.ts';
import type { History, HistoryHeader } from '../domain/history.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/supervisor
import {
  initialSnapshot,
  machines,
  stateName,
  step as stepMachine,
  type AnySnapshot,
  type Step,
} from '../machines/runtime.ts';
import { describeMachine } from '../server/machine-graph.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/supervisor
import { defaultUpcasters, type UpcasterRegistry } from '../store/upcasters.ts';
import { diffContext, formatChange, type ContextChange } from './context-diff.ts';
import { historyEvents, historyLines, IssueList, parseEventLine, parseHeaderLine } from '../inspect/history-file.ts';
import { outPaced, truncate, type Io } from './output.ts';
import { streamPages } from './log-pages.ts';

const eventTypesCache = new Map<ActorKind, Set<string>>();
function knownEventTypes(kind: ActorKind): Set<string> {
  let s = eventTypesCache.get(kind);
  if (!s) {
    s = new Set([...describeMachine(kind, machines[kind]).events, rejectedType(kind)]);
    eventTypesCache.set(kind, s);
  }
  return s;
}

const where = (e: RecordedEvent): string => `event v${e.version} (seq ${e.seq}) ${e.type}`;

/** One event of a history lifted to the current schema, or the ReplayError naming why it cannot be. */
function liftEvent(kind: ActorKind, e: RecordedEvent, upcasters: UpcasterRegistry): RecordedEvent {
  const known = knownEventTypes(kind);
  if (!known.has(e.type)) {
    throw new ReplayError(
      `${where(e)}: unknown event type for kind ${kind}; this runlog's ${kind} machine takes ${[...known].join(', ')}`,
      {
        version: e.version,
        seq: e.seq,
        type: e.type,
        schema: e.schema,
      },
    );
  }
  try {
    const { schema, data } = upcasters.upcast(e.type, e.schema, e.data);
    return { ...e, schema, data };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new ReplayError(`${where(e)}: ${message}`, {
      version: e.version,
      seq: e.seq,
      type: e.type,
      schema: e.schema,
    });
  }
}

/** Folds events one at a time, keeping only the current snapshot: the steps of a replay, produced as it goes. */
class Stepper {
  private snapshot: AnySnapshot;
  private readonly machine;
  constructor(
    readonly kind: ActorKind,
    from?: AnySnapshot,
  ) {
    this.machine = machines[kind];
    this.snapshot = from ?? initialSnapshot(this.machine);
  }
  next(e: RecordedEvent): Step {
    const event: MachineEvent & { version: number } = { ...toMachineEvent(e), version: e.version };
    const from = stateName(this.snapshot);
    const r = stepMachine(this.machine, this.snapshot, event);
    this.snapshot = r.snapshot;
    return {
      version: e.version,
      event,
      from,
      to: stateName(this.snapshot),
      accepted: r.accepted,
      effects: r.effects,
      context: this.snapshot.context,
    };
  }
}

/** The ReplayError for a step a history's machine could not take (a recorded rejection is fine). */
function stuckError(kind: ActorKind, e: RecordedEvent, s: Step): ReplayError | null {
  if (s.accepted || s.event.type === rejectedType(kind)) return null;
  return new ReplayError(
    `${where(e)}: the ${kind} machine cannot take it in state '${s.from}' (the history does not fit this machine)`,
    {
      version: e.version,
      seq: e.seq,
      type: e.type,
      state: s.from,
    },
  );
}

/**
 * Replays a history with no side effects: events are lifted to the current schema by the upcasters,
 * then folded through the kind's machine. Fails with code REPLAY naming the first event it cannot apply
 * (unknown type for the kind, a schema newer than known, or an event the machine does not take there).
 */
export function replayHistory(
  history: History,
  options: { to?: number; upcasters?: UpcasterRegistry } = {},
): ReplayView {
  const { kind, id } = history.header;
  const upcasters = options.upcasters ?? defaultUpcasters();
  const last = history.events.at(-1)?.version ?? 0;
  if (options.to !== undefined && options.to > last) throw new ReplayToInvalidError(id, last, options.to);
  const upto = options.to === undefined ? history.events : history.events.filter((e) => e.version <= options.to!);
  const lifted = upto.map((e) => liftEvent(kind, e, upcasters));
  const view = { ...replayEvents(kind, id, lifted, options.to), version: last };
  const stuck = view.steps.find((s) => !s.accepted && s.event.type !== rejectedType(kind));
  if (stuck)
    throw stuckError(
      kind,
      lifted.find((x) => x.version === stuck.version)!,
      stuck,
    )!;
  return view;
}

/**
 * Reads a history file once, line by line, and judges it whole before anything is printed: every malformed line
 * (HISTORY_INVALID), a count that disagrees with the header, `to` past its end, and the first event that cannot
 * be replayed up to `to` (REPLAY). Holds one snapshot, never the events.
 */
async function checkHistoryFile(
  path: string,
  options: { to?: number; upcasters: UpcasterRegistry; id?: string },
): Promise<HistoryHeader> {
  try {
    if (!statSync(path).isFile()) throw new ValidationError('HISTORY_INVALID', `${path} is not a file`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError('history file', path);
    throw err;
  }
  let header: HistoryHeader | undefined;
  const issues = new IssueList();
  let stepper: Stepper | undefined;
  let replayError: ReplayError | null = null;
  let count = 0;
  let n = 0;
  for await (const line of historyLines(path, options.id)) {
    n += 1;
    if (n === 1) {
      header = parseHeaderLine(line, path);
      stepper = new Stepper(header.kind);
      continue;
    }
    const r = parseEventLine(line, n, header!.stream);
    if (typeof r === 'string') {
      issues.add(r);
      continue;
    }
    count += 1;
    // Replay is judged only while the file is sound so far and up to `to` (a history replays up to its first bad event).
    if (!issues.empty || replayError || (options.to !== undefined && r.version > options.to)) continue;
    try {
      const lifted = liftEvent(header!.kind, r, options.upcasters);
      replayError = stuckError(header!.kind, lifted, stepper!.next(lifted));
    } catch (err) {
      if (!(err instanceof ReplayError)) throw err;
      replayError = err;
    }
  }
  if (!header) header = parseHeaderLine(undefined, path);
  if (issues.empty && count !== header.version)
    issues.add(`the header says ${header.version} events but the file holds ${count} (truncated or edited?)`);
  if (!issues.empty)
    throw new ValidationError('HISTORY_INVALID', `${path} is not a valid runlog history`, issues.all());
  if (options.to !== undefined && options.to > count) throw new ReplayToInvalidError(header.id, count, options.to);
  if (replayError) throw replayError;
  return header;
}

/** `runlog replay --file`: checks the file whole, then replays it again as it prints (memory: one actor's state). */
export async function replayHistoryFile(
  io: Io,
  path: string,
  options: { step: boolean; to: number | undefined; upcasters?: UpcasterRegistry; id?: string },
): Promise<void> {
  const upcasters = options.upcasters ?? defaultUpcasters();
  const header = await checkHistoryFile(path, {
    upcasters,
    ...(options.to !== undefined ? { to: options.to } : {}),
    ...(options.id !== undefined ? { id: options.id } : {}),
  });
  const lifted = async function* (): AsyncGenerator<RecordedEvent> {
    for await (const e of historyEvents(path, header, options.id)) {
      if (options.to !== undefined && e.version > options.to) return; // past --to: not lifted, not even read on
      yield liftEvent(header.kind, e, upcasters);
    }
  };
  await printReplayStream(io, { kind: header.kind, id: header.id, version: header.version }, lifted(), options);
}

/** `runlog replay <id>`: the actor's events read from the log a page at a time, printed as they are folded. */
export async function replayFromLog(
  io: Io,
  store: EventStorePort,
  id: string,
  options: { step: boolean; to: number | undefined },
): Promise<void> {
  const ref = await resolveActor(store, id);
  const version = await store.streamVersion(ref.stream);
  if (options.to !== undefined && options.to > version) throw new ReplayToInvalidError(ref.id, version, options.to);
  // State at a version: from the newest usable snapshot at or before it (snapshots.ts), folding only the events
  // after it; the transitions before the snapshot are not printed (replay without --to prints them all).
  const cached = options.to !== undefined ? await store.snapshotAtOrBefore(ref.stream, options.to) : undefined;
  const restored = cached ? decodeSnapshot(machines[ref.kind], cached) : null;
  const start = restored ? { version: cached!.version, snapshot: restored } : undefined;
  const events = streamPages(store, ref.stream, start ? start.version + 1 : 1, options.to);
  await printReplayStream(io, { kind: ref.kind, id: ref.id, version }, events, {
    ...options,
    ...(start ? { start } : {}),
  });
}

/** One step as `runlog replay` prints it (changes: with --step, what changed in the context since the step before). */
function printStep(io: Io, kind: ActorKind, s: Step, changes: ContextChange[] | null): void {
  if (!changes) {
    const mark = s.accepted ? '' : '  (not accepted)';
    const fx = s.effects.length ? `  effects: ${s.effects.map((e) => e.type).join(', ')}` : '';
    io.out(`v${String(s.version).padEnd(4)} ${s.event.at}  ${s.event.type.padEnd(28)} ${s.from} → ${s.to}${fx}${mark}`);
    return;
  }
  const rejected =
    s.event.type === rejectedType(kind) ? (s.event.data as { rejected?: { type?: string }; state?: string }) : null;
  const title = rejected
    ? `${s.event.type} (${rejected.rejected?.type ?? '?'} was refused in ${rejected.state ?? '?'})`
    : s.event.type;
  io.out(`v${s.version}  ${s.event.at}  ${title}`);
  io.out(`    ${s.from} → ${s.to}${s.accepted ? '' : '   (not accepted: nothing changed)'}`);
  if (s.effects.length > 0) {
    const effects = s.effects.map(
      (e) => `${e.type}${Object.keys(e.params).length ? ` ${truncate(JSON.stringify(e.params), 80)}` : ''}`,
    );
    io.out(`    effects: ${effects.join('\n             ')}`);
  }
  if (changes.length > 0) {
    io.out('    context:');
    for (const c of changes) io.out(`      ${formatChange(c).replaceAll('\n', '\n      ')}`);
  }
  io.out('');
}

/** The first step's "before": the machine's initial context. */
function initialMachineContext(kind: ActorKind): Record<string, unknown> {
  return initialSnapshot(machines[kind]).context as Record<string, unknown>;
}

/**
 * Folds events and prints each step as it is made: text (a line per transition, or a block per step with
 * --step), or with --json one JSON document `{id, kind, version, steps: [...], to, state, context}` written
 * piece by piece. Holds the current state (and, for --step, the context before it), never the steps. Stops
 * early when stdout's reader has gone away.
 */
export async function printReplayStream(
  io: Io,
  actor: { kind: ActorKind; id: string; version: number },
  events: Iterable<RecordedEvent> | AsyncIterable<RecordedEvent>,
  options: { step: boolean; to: number | undefined; start?: { version: number; snapshot: AnySnapshot } },
): Promise<void> {
  const start = options.start;
  const stepper = new Stepper(actor.kind, start?.snapshot);
  let prev: Record<string, unknown> = start
    ? (start.snapshot.context as Record<string, unknown>)
    : initialMachineContext(actor.kind);
  let last: Step | undefined;
  let first = true;
  // From a snapshot: `from` is the version it stands at, and steps begin after it.
  if (io.json)
    io.out(
      `{"id":${JSON.stringify(actor.id)},"kind":${JSON.stringify(actor.kind)},"version":${actor.version},` +
        `${start ? `"from":${start.version},` : ''}"steps":[`,
    );
  else if (start)
    io.out(
      `v1–v${start.version}: from the snapshot at v${start.version} (${stateName(start.snapshot)}); ` +
        'replay without --to prints every transition',
    );
  for await (const e of events) {
    if (options.to !== undefined && e.version > options.to) break;
    if (io.closed) return;
    const s = stepper.next(e);
    last = s;
    const changes = options.step ? diffContext(prev, s.context) : null;
    prev = s.context;
    if (io.json) {
      await outPaced(io, `${first ? '' : ','}${JSON.stringify(changes ? { ...s, changes } : s)}`);
      first = false;
    } else {
      printStep(io, actor.kind, s, changes);
      const wait = io.room?.();
      if (wait) await wait;
    }
  }
  const to = last?.version ?? start?.version ?? 0;
  const state = last?.to ?? (start ? stateName(start.snapshot) : 'new');
  const context = last?.context ?? (start?.snapshot.context as Record<string, unknown> | undefined) ?? {};
  if (io.json) {
    io.out(`],"to":${to},"state":${JSON.stringify(state)},"context":${JSON.stringify(context)}}`);
    return;
  }
  if (options.to !== undefined)
    io.out(`${options.step ? '' : '\n'}at v${to}: ${state}\ncontext:\n${JSON.stringify(context, null, 2)}`);
}
