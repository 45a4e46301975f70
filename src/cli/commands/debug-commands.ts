// Replay debugging: `runlog export <id>` writes an actor's history as JSON lines, and
// `runlog replay --file history.jsonl` replays one offline (no database, no side effects). `--step`
// prints every transition with the effects that ran live and what changed in the context.
import { readFileSync } from 'node:fs';
import { createRunlog } from '../../actors/runlog.ts';
import { replayEvents, resolveActor, type ReplayView } from '../../actors/inspection.ts';
import { NotFoundError, ReplayError, UsageError, ValidationError } from '../../domain/errors.ts';
import { rejectedType, streamName, type ActorKind, type RecordedEvent } from '../../domain/events.ts';
import { initialSnapshot, machines, type Step } from '../../machines/replay.ts';
import { describeMachine } from '../../server/machine-graph.ts';
import { defaultUpcasters, type UpcasterRegistry } from '../../store/upcasters.ts';
import type { Command } from '../command.ts';
import { EXIT, truncate, type Io } from '../output.ts';

/** The file format `runlog export` writes; a reader refuses formats newer than it knows. */
export const HISTORY_FORMAT = 1;

export interface HistoryHeader {
  runlog: 'history';
  format: number;
  kind: ActorKind;
  id: string;
  stream: string;
  /** The actor's version (its number of events) when exported. */
  version: number;
  exportedAt: string;
}

export interface History {
  header: HistoryHeader;
  events: RecordedEvent[];
}

// ---------------------------------------------------------------------------------------------
// Context diffs

export interface ContextChange {
  /** Dotted path of the key ("spec.tools", "lastCrash"). */
  path: string;
  op: 'added' | 'removed' | 'changed';
  before?: unknown;
  after?: unknown;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const same = (a: unknown, b: unknown): boolean => a === b || JSON.stringify(a) === JSON.stringify(b);

/**
 * Key-level differences between two contexts, recursing into nested objects. An array that only grew
 * (or shrank) at its end reports the items added (removed) as `path[i]`; other array edits compare whole.
 */
export function diffContext(before: unknown, after: unknown, prefix = ''): ContextChange[] {
  if (Array.isArray(before) && Array.isArray(after) && prefix) {
    const n = Math.min(before.length, after.length);
    if (before.slice(0, n).every((x, i) => same(x, after[i]))) {
      const out: ContextChange[] = [];
      for (let i = n; i < after.length; i++) out.push({ path: `${prefix}[${i}]`, op: 'added', after: after[i] });
      for (let i = n; i < before.length; i++) out.push({ path: `${prefix}[${i}]`, op: 'removed', before: before[i] });
      return out;
    }
  }
  if (!isPlainObject(before) || !isPlainObject(after)) {
    return same(before, after) ? [] : [{ path: prefix || '(context)', op: 'changed', before, after }];
  }
  const out: ContextChange[] = [];
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const k of keys) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (!Object.hasOwn(before, k)) out.push({ path, op: 'added', after: after[k] });
    else if (!Object.hasOwn(after, k)) out.push({ path, op: 'removed', before: before[k] });
    else out.push(...diffContext(before[k], after[k], path));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reading and replaying a history file

const KINDS: readonly ActorKind[] = ['instance', 'execution'];

/** Parses an exported history. Every malformed line is listed (not only the first). */
export function parseHistory(text: string, source = 'history'): History {
  const lines = text.split('\n');
  while (lines.length > 0 && lines.at(-1)!.trim() === '') lines.pop();
  if (lines.length === 0) throw new ValidationError('HISTORY_INVALID', `${source} is empty (expected a header line from runlog export)`);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(lines[0]!);
  } catch {
    throw new ValidationError('HISTORY_INVALID', `${source} line 1 is not JSON: it should be the header {"runlog":"history",…} that runlog export writes`);
  }
  const hi: string[] = [];
  if (!isPlainObject(header) || header.runlog !== 'history') {
    throw new ValidationError('HISTORY_INVALID', `${source} line 1 is not a runlog history header ({"runlog":"history",…})`);
  }
  const format = header.format ?? 1;
  if (typeof format !== 'number' || !Number.isInteger(format) || format < 1) hi.push(`header: format must be a positive whole number`);
  else if (format > HISTORY_FORMAT) {
    throw new ReplayError(`${source} has history format ${format}; this runlog reads up to format ${HISTORY_FORMAT}. Upgrade runlog.`, { format, supported: HISTORY_FORMAT });
  }
  if (!KINDS.includes(header.kind as ActorKind)) hi.push(`header: kind must be one of ${KINDS.join(', ')}, not ${JSON.stringify(header.kind)}`);
  if (typeof header.id !== 'string' || header.id === '') hi.push('header: id must be a non-empty string');
  if (typeof header.version !== 'number' || !Number.isInteger(header.version) || header.version < 0) hi.push('header: version must be a whole number');
  if (hi.length > 0) throw new ValidationError('HISTORY_INVALID', `${source}: malformed header`, hi);
  const kind = header.kind as ActorKind;
  const id = header.id as string;
  const stream = typeof header.stream === 'string' ? header.stream : streamName(kind, id);

  const issues: string[] = [];
  const events: RecordedEvent[] = [];
  for (let i = 1; i < lines.length; i++) {
    const n = i + 1;
    // Line n holds version n - 1: judged by position, one bad line is not reported for every line after it.
    const expected = i;
    const raw = lines[i]!;
    let e: unknown;
    try {
      e = raw.trim() === '' ? undefined : JSON.parse(raw);
    } catch {
      e = undefined;
    }
    if (!isPlainObject(e)) {
      issues.push(`line ${n}: ${raw.trim() === '' ? 'empty line' : 'not a JSON object'}`);
      continue;
    }
    const problems: string[] = [];
    if (e.version !== expected) problems.push(`version is ${JSON.stringify(e.version)}, expected ${expected} (events must be complete and in order)`);
    if (typeof e.type !== 'string' || e.type === '') problems.push('type must be a non-empty string');
    if (typeof e.schema !== 'number' || !Number.isInteger(e.schema) || e.schema < 1) problems.push('schema must be a whole number ≥ 1');
    if (!isPlainObject(e.data)) problems.push('data must be an object');
    if (typeof e.at !== 'string' || Number.isNaN(Date.parse(e.at))) problems.push('at must be an ISO timestamp');
    if (e.meta !== undefined && !isPlainObject(e.meta)) problems.push('meta must be an object');
    if (e.seq !== undefined && (typeof e.seq !== 'number' || !Number.isInteger(e.seq))) problems.push('seq must be a whole number');
    if (e.stream !== undefined && e.stream !== stream) problems.push(`stream is ${JSON.stringify(e.stream)}, not the header's ${stream}`);
    if (problems.length > 0) {
      issues.push(`line ${n}: ${problems.join('; ')}`);
      continue;
    }
    events.push({
      seq: typeof e.seq === 'number' ? e.seq : expected,
      stream,
      version: expected,
      type: e.type as string,
      schema: e.schema as number,
      data: e.data as Record<string, unknown>,
      meta: (e.meta as Record<string, unknown> | undefined) ?? {},
      at: e.at as string,
    });
  }
  if (issues.length === 0 && events.length !== header.version) {
    issues.push(`the header says ${header.version} events but the file holds ${events.length} (truncated or edited?)`);
  }
  if (issues.length > 0) throw new ValidationError('HISTORY_INVALID', `${source} is not a valid runlog history`, issues);
  return {
    header: { runlog: 'history', format: format as number, kind, id, stream, version: header.version as number, exportedAt: String(header.exportedAt ?? '') },
    events,
  };
}

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

/**
 * Replays a history with no side effects: events are lifted to the current schema by the upcasters,
 * then folded through the kind's machine. Fails with code REPLAY naming the first event it cannot apply
 * (unknown type for the kind, a schema newer than known, or an event the machine does not take there).
 */
export function replayHistory(history: History, options: { to?: number; upcasters?: UpcasterRegistry } = {}): ReplayView {
  const { kind, id } = history.header;
  const upcasters = options.upcasters ?? defaultUpcasters();
  const last = history.events.at(-1)?.version ?? 0;
  if (options.to !== undefined && options.to > last) throw new ReplayError(`${id} has ${last} events; cannot replay to ${options.to}`, { id, to: options.to });
  const upto = options.to === undefined ? history.events : history.events.filter((e) => e.version <= options.to!);
  const known = knownEventTypes(kind);
  const lifted: RecordedEvent[] = [];
  for (const e of upto) {
    if (!known.has(e.type)) {
      throw new ReplayError(`${where(e)}: unknown event type for kind ${kind}; this runlog's ${kind} machine takes ${[...known].join(', ')}`, {
        version: e.version,
        seq: e.seq,
        type: e.type,
        schema: e.schema,
      });
    }
    try {
      const { schema, data } = upcasters.upcast(e.type, e.schema, e.data);
      lifted.push({ ...e, schema, data });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new ReplayError(`${where(e)}: ${message}`, { version: e.version, seq: e.seq, type: e.type, schema: e.schema });
    }
  }
  const view = { ...replayEvents(kind, id, lifted, options.to), version: last };
  const stuck = view.steps.find((s) => !s.accepted && s.event.type !== rejectedType(kind));
  if (stuck) {
    const e = lifted.find((x) => x.version === stuck.version)!;
    throw new ReplayError(`${where(e)}: the ${kind} machine cannot take it in state '${stuck.from}' (the history does not fit this machine)`, {
      version: e.version,
      seq: e.seq,
      type: e.type,
      state: stuck.from,
    });
  }
  return view;
}

export function readHistoryFile(path: string): History {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError('history file', path);
    throw err;
  }
  return parseHistory(text, path);
}

// ---------------------------------------------------------------------------------------------
// Printing

const show = (v: unknown): string => (v === undefined ? 'undefined' : truncate(JSON.stringify(v), 140));

/** One change as text; an object that appeared (null → {…}) is listed key by key underneath. */
export function formatChange(c: ContextChange): string {
  if (c.op === 'added') return `+ ${c.path} = ${show(c.after)}`;
  if (c.op === 'removed') return `- ${c.path} (was ${show(c.before)})`;
  if ((c.before === null || c.before === undefined) && isPlainObject(c.after) && Object.keys(c.after).length > 0) {
    const keys = Object.entries(c.after).map(([k, v]) => `\n    ${k}: ${show(v)}`);
    return `~ ${c.path}: ${show(c.before)} → {${keys.join('')}\n  }`;
  }
  return `~ ${c.path}: ${show(c.before)} → ${show(c.after)}`;
}

/** Each step with what changed in the context since the step before. */
export function stepsWithChanges(steps: readonly Step[], initial: Record<string, unknown> = {}): (Step & { changes: ContextChange[] })[] {
  let prev: Record<string, unknown> = initial;
  return steps.map((s) => {
    const changes = diffContext(prev, s.context);
    prev = s.context;
    return { ...s, changes };
  });
}

function printSteps(io: Io, view: ReplayView, step: boolean): void {
  if (!step) {
    for (const s of view.steps) {
      const mark = s.accepted ? '' : '  (not accepted)';
      const fx = s.effects.length ? `  effects: ${s.effects.map((e) => e.type).join(', ')}` : '';
      io.out(`v${String(s.version).padEnd(4)} ${s.event.at}  ${s.event.type.padEnd(28)} ${s.from} → ${s.to}${fx}${mark}`);
    }
    return;
  }
  for (const s of stepsWithChanges(view.steps, initialMachineContext(view.kind))) {
    const rejected = s.event.type === rejectedType(view.kind) ? s.event.data as { rejected?: { type?: string }; state?: string } : null;
    const title = rejected ? `${s.event.type} (${rejected.rejected?.type ?? '?'} was refused in ${rejected.state ?? '?'})` : s.event.type;
    io.out(`v${s.version}  ${s.event.at}  ${title}`);
    io.out(`    ${s.from} → ${s.to}${s.accepted ? '' : '   (not accepted: nothing changed)'}`);
    if (s.effects.length > 0) io.out(`    effects: ${s.effects.map((e) => `${e.type}${Object.keys(e.params).length ? ` ${truncate(JSON.stringify(e.params), 80)}` : ''}`).join('\n             ')}`);
    if (s.changes.length > 0) {
      io.out('    context:');
      for (const c of s.changes) io.out(`      ${formatChange(c).replaceAll('\n', '\n      ')}`);
    }
    io.out('');
  }
}

/** The first step's "before": the machine's initial context. */
function initialMachineContext(kind: ActorKind): Record<string, unknown> {
  return initialSnapshot(machines[kind]).context as Record<string, unknown>;
}

/** Prints a replay view the way `runlog replay` does (shared by the database and --file paths). */
export function printReplay(io: Io, view: ReplayView, options: { step: boolean; to: number | undefined }): void {
  if (io.json) {
    const out = options.step ? { ...view, steps: stepsWithChanges(view.steps, initialMachineContext(view.kind)) } : view;
    io.out(JSON.stringify(out, null, 2));
    return;
  }
  printSteps(io, view, options.step);
  if (options.to !== undefined) io.out(`${options.step ? '' : '\n'}at v${view.to}: ${view.state}\ncontext:\n${JSON.stringify(view.context, null, 2)}`);
}

// ---------------------------------------------------------------------------------------------
// Commands

export const exportCommand: Command = {
  name: 'export',
  summary: "write an actor's history as JSON lines (a header, then one recorded event per line)",
  usage: 'runlog export <id> > history.jsonl   (replay it anywhere with: runlog replay --file history.jsonl)',
  run: async (args, io) => {
    const id = args.positionals[0];
    if (!id) throw new UsageError(`missing actor id\nusage: ${exportCommand.usage}`);
    if (args.positionals.length > 1) throw new UsageError(`export takes one actor id\nusage: ${exportCommand.usage}`);
    const rl = await createRunlog({ home: args.home, db: args.db, supervise: false });
    try {
      const ref = resolveActor(rl.store, id);
      const events = rl.store.read(ref.stream);
      const header: HistoryHeader = {
        runlog: 'history',
        format: HISTORY_FORMAT,
        kind: ref.kind,
        id: ref.id,
        stream: ref.stream,
        version: events.at(-1)?.version ?? 0,
        exportedAt: new Date().toISOString(),
      };
      io.out(JSON.stringify(header));
      for (const e of events) io.out(JSON.stringify(e));
      io.err(`exported ${events.length} events of ${ref.kind} ${ref.id}`);
      return EXIT.ok;
    } finally {
      await rl.close();
    }
  },
};
