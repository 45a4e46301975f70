// Replay debugging: `runlog export <id>` writes an actor's history as JSON lines, and
// `runlog replay --file history.jsonl` replays one offline (no database, no side effects). `--step`
// prints every transition with the effects that ran live and what changed in the context.
// Replays stream: a file is read line by line (twice: checked whole first, so a bad file prints nothing, then
// folded and printed), and only the current state is held, never the history or its steps.
import { closeSync, createReadStream, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { createGunzip } from 'node:zlib';
import { replayEvents, resolveActor, type ReplayView } from '../../actors/inspection.ts';
import { decodeSnapshot } from '../../actors/snapshots.ts';
import { NotFoundError, ReplayError, ReplayToInvalidError, UsageError, ValidationError } from '../../domain/errors.ts';
import { rejectedType, streamName, toMachineEvent, type ActorKind, type MachineEvent, type RecordedEvent } from '../../domain/events.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/actors
import { initialSnapshot, machines, stateName, step as stepMachine, type AnySnapshot, type Step } from '../../machines/runtime.ts';
import { describeMachine } from '../../server/machine-graph.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/actors
import type { ReadableLog } from '../../store/host-store.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/actors
import { defaultUpcasters, type UpcasterRegistry } from '../../store/upcasters.ts';
import { outPaced, truncate, type Io } from '../output.ts';

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
// Reading a history file

const KINDS: readonly ActorKind[] = ['instance', 'execution'];

/** Line 1 of a history: its header, or the error that says why it is not one. */
function parseHeaderLine(line: string | undefined, source: string): HistoryHeader {
  if (line === undefined) throw new ValidationError('HISTORY_INVALID', `${source} is empty (expected a header line from runlog export)`);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(line);
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
  return {
    runlog: 'history',
    format: format as number,
    kind,
    id,
    stream: typeof header.stream === 'string' ? header.stream : streamName(kind, id),
    version: header.version as number,
    exportedAt: String(header.exportedAt ?? ''),
  };
}

/** Line `n` of a history (line 1 is the header, so it holds version n - 1): the event, or what is wrong with it. */
function parseEventLine(raw: string, n: number, stream: string): RecordedEvent | string {
  // Judged by position: one bad line is not reported for every line after it.
  const expected = n - 1;
  let e: unknown;
  try {
    e = raw.trim() === '' ? undefined : JSON.parse(raw);
  } catch {
    e = undefined;
  }
  if (!isPlainObject(e)) return `line ${n}: ${raw.trim() === '' ? 'empty line' : 'not a JSON object'}`;
  const problems: string[] = [];
  if (e.version !== expected) problems.push(`version is ${JSON.stringify(e.version)}, expected ${expected} (events must be complete and in order)`);
  if (typeof e.type !== 'string' || e.type === '') problems.push('type must be a non-empty string');
  if (typeof e.schema !== 'number' || !Number.isInteger(e.schema) || e.schema < 1) problems.push('schema must be a whole number ≥ 1');
  if (!isPlainObject(e.data)) problems.push('data must be an object');
  if (typeof e.at !== 'string' || Number.isNaN(Date.parse(e.at))) problems.push('at must be an ISO timestamp');
  if (e.meta !== undefined && !isPlainObject(e.meta)) problems.push('meta must be an object');
  if (e.seq !== undefined && (typeof e.seq !== 'number' || !Number.isInteger(e.seq))) problems.push('seq must be a whole number');
  if (e.stream !== undefined && e.stream !== stream) problems.push(`stream is ${JSON.stringify(e.stream)}, not the header's ${stream}`);
  if (problems.length > 0) return `line ${n}: ${problems.join('; ')}`;
  return {
    seq: typeof e.seq === 'number' ? e.seq : expected,
    stream,
    version: expected,
    type: e.type as string,
    schema: e.schema as number,
    data: e.data as Record<string, unknown>,
    meta: (e.meta as Record<string, unknown> | undefined) ?? {},
    at: e.at as string,
  };
}

/** A file's issues are listed whole up to this many; past it, how many more there are. */
const MAX_ISSUES = 100;

/** Collects a history's problems: every one (up to MAX_ISSUES), then the count of the rest. */
class IssueList {
  readonly items: string[] = [];
  private more = 0;
  add(issue: string): void {
    if (this.items.length < MAX_ISSUES) this.items.push(issue);
    else this.more += 1;
  }
  get empty(): boolean {
    return this.items.length === 0;
  }
  all(): string[] {
    return this.more > 0 ? [...this.items, `… and ${this.more} more problems`] : this.items;
  }
}

/** Parses an exported history held in memory. Every malformed line is listed (not only the first). */
export function parseHistory(text: string, source = 'history'): History {
  const lines = text.split('\n');
  while (lines.length > 0 && lines.at(-1)!.trim() === '') lines.pop();
  const header = parseHeaderLine(lines[0], source);
  const issues = new IssueList();
  const events: RecordedEvent[] = [];
  for (let i = 1; i < lines.length; i++) {
    const r = parseEventLine(lines[i]!, i + 1, header.stream);
    if (typeof r === 'string') issues.add(r);
    else events.push(r);
  }
  if (issues.empty && events.length !== header.version) {
    issues.add(`the header says ${header.version} events but the file holds ${events.length} (truncated or edited?)`);
  }
  if (!issues.empty) throw new ValidationError('HISTORY_INVALID', `${source} is not a valid runlog history`, issues.all());
  return { header, events };
}

/** Whether a file starts with gzip's magic bytes (an archive written by `runlog archive`, or a gzipped export). */
function isGzip(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const b = Buffer.alloc(2);
    return readSync(fd, b, 0, 2, 0) === 2 && b[0] === 0x1f && b[1] === 0x8b;
  } finally {
    closeSync(fd);
  }
}

/** The lines of a file (gunzipped when it is gzip), read as a stream; trailing blank lines are dropped, blank lines inside are kept. */
async function* fileLines(path: string): AsyncGenerator<string> {
  const raw = createReadStream(path);
  const gz = isGzip(path) ? createGunzip() : null;
  const input = gz ? raw.pipe(gz) : raw;
  input.setEncoding('utf8');
  if (gz) raw.on('error', (err) => gz.destroy(err));
  const rl = createInterface({ input, crlfDelay: Infinity });
  let blanks = 0;
  try {
    for await (const line of rl) {
      if (line.trim() === '') {
        blanks += 1;
        continue;
      }
      for (; blanks > 0; blanks--) yield '';
      yield line;
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (code.startsWith('Z_') || code === 'ERR_BUFFER_TOO_LARGE') throw new ValidationError('HISTORY_INVALID', `${path} is not a complete gzip file (${(err as Error).message}): truncated or damaged`);
    throw err;
  } finally {
    rl.close();
    raw.destroy();
    gz?.destroy();
  }
}

const ARCHIVE_HEADER = '{"runlog":"archive"';
const HISTORY_HEADER = '{"runlog":"history"';

/**
 * The lines of one history in a file: the whole file when it is one history (`runlog export`), or, in an archive
 * (`runlog archive`: an archive header, then histories one after another, then a trailer), the history of actor
 * `id`. An archive needs an id; a history file with an id must be that actor's.
 */
async function* historyLines(path: string, id: string | undefined): AsyncGenerator<string> {
  let n = 0;
  let archive = false;
  let selected = false;
  let actors = 0;
  for await (const line of fileLines(path)) {
    n += 1;
    if (n === 1 && line.startsWith(ARCHIVE_HEADER)) {
      archive = true;
      if (id === undefined) {
        let count = '';
        try {
          count = ` of ${(JSON.parse(line) as { actors?: number }).actors ?? '?'} actors`;
        } catch {
          /* the count is only for the message */
        }
        throw new UsageError(`${path} is an archive${count}: name the actor to replay (runlog replay --file ${path} <id>)`);
      }
      continue;
    }
    if (!archive) {
      if (n === 1 && id !== undefined && line.startsWith(HISTORY_HEADER)) {
        const h = JSON.parse(line) as { id?: unknown };
        if (h.id !== id) throw new NotFoundError('actor', `${id} in ${path} (it holds the history of ${String(h.id)})`);
      }
      yield line;
      continue;
    }
    if (line.startsWith('{"runlog":')) {
      if (selected) return; // the next history, or the trailer: this actor's history is complete
      if (line.startsWith(HISTORY_HEADER)) {
        actors += 1;
        let h: { id?: unknown; stream?: unknown };
        try {
          h = JSON.parse(line) as typeof h;
        } catch {
          continue;
        }
        if (h.id === id || h.stream === id) {
          selected = true;
          yield line;
        }
      }
      continue;
    }
    if (selected) yield line;
  }
  if (archive && !selected) throw new NotFoundError('actor', `${id} in archive ${path} (${actors} actors)`);
}

/** A history file's events, parsed line by line (the file was checked whole by checkHistoryFile first). */
async function* historyEvents(path: string, header: HistoryHeader, id: string | undefined): AsyncGenerator<RecordedEvent> {
  let n = 0;
  for await (const line of historyLines(path, id)) {
    n += 1;
    if (n === 1) continue;
    const r = parseEventLine(line, n, header.stream);
    if (typeof r === 'string') throw new ValidationError('HISTORY_INVALID', `${path} changed while it was replayed`, [r]);
    yield r;
  }
}

// ---------------------------------------------------------------------------------------------
// Replaying

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
    throw new ReplayError(`${where(e)}: unknown event type for kind ${kind}; this runlog's ${kind} machine takes ${[...known].join(', ')}`, {
      version: e.version,
      seq: e.seq,
      type: e.type,
      schema: e.schema,
    });
  }
  try {
    const { schema, data } = upcasters.upcast(e.type, e.schema, e.data);
    return { ...e, schema, data };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new ReplayError(`${where(e)}: ${message}`, { version: e.version, seq: e.seq, type: e.type, schema: e.schema });
  }
}

/** Folds events one at a time, keeping only the current snapshot: the steps of a replay, produced as it goes. */
class Stepper {
  private snapshot: AnySnapshot;
  private readonly machine;
  constructor(readonly kind: ActorKind, from?: AnySnapshot) {
    this.machine = machines[kind];
    this.snapshot = from ?? initialSnapshot(this.machine);
  }
  next(e: RecordedEvent): Step {
    const event: MachineEvent & { version: number } = { ...toMachineEvent(e), version: e.version };
    const from = stateName(this.snapshot);
    const r = stepMachine(this.machine, this.snapshot, event);
    this.snapshot = r.snapshot;
    return { version: e.version, event, from, to: stateName(this.snapshot), accepted: r.accepted, effects: r.effects, context: this.snapshot.context };
  }
}

/** The ReplayError for a step a history's machine could not take (a recorded rejection is fine). */
function stuckError(kind: ActorKind, e: RecordedEvent, s: Step): ReplayError | null {
  if (s.accepted || s.event.type === rejectedType(kind)) return null;
  return new ReplayError(`${where(e)}: the ${kind} machine cannot take it in state '${s.from}' (the history does not fit this machine)`, {
    version: e.version,
    seq: e.seq,
    type: e.type,
    state: s.from,
  });
}

/**
 * Replays a history with no side effects: events are lifted to the current schema by the upcasters,
 * then folded through the kind's machine. Fails with code REPLAY naming the first event it cannot apply
 * (unknown type for the kind, a schema newer than known, or an event the machine does not take there).
 */
export function replayHistory(history: History, options: { to?: number; upcasters?: UpcasterRegistry } = {}): ReplayView {
  const { kind, id } = history.header;
  const upcasters = options.upcasters ?? defaultUpcasters();
  const last = history.events.at(-1)?.version ?? 0;
  if (options.to !== undefined && options.to > last) throw new ReplayToInvalidError(id, last, options.to);
  const upto = options.to === undefined ? history.events : history.events.filter((e) => e.version <= options.to!);
  const lifted = upto.map((e) => liftEvent(kind, e, upcasters));
  const view = { ...replayEvents(kind, id, lifted, options.to), version: last };
  const stuck = view.steps.find((s) => !s.accepted && s.event.type !== rejectedType(kind));
  if (stuck) throw stuckError(kind, lifted.find((x) => x.version === stuck.version)!, stuck)!;
  return view;
}

/** A history file held in memory (small files, tests). `runlog replay --file` streams instead (replayHistoryFile). */
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

/**
 * Reads a history file once, line by line, and judges it whole before anything is printed: every malformed line
 * (HISTORY_INVALID), a count that disagrees with the header, `to` past its end, and the first event that cannot
 * be replayed up to `to` (REPLAY). Holds one snapshot, never the events.
 */
async function checkHistoryFile(path: string, options: { to?: number; upcasters: UpcasterRegistry; id?: string }): Promise<HistoryHeader> {
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
  if (issues.empty && count !== header.version) issues.add(`the header says ${header.version} events but the file holds ${count} (truncated or edited?)`);
  if (!issues.empty) throw new ValidationError('HISTORY_INVALID', `${path} is not a valid runlog history`, issues.all());
  if (options.to !== undefined && options.to > count) throw new ReplayToInvalidError(header.id, count, options.to);
  if (replayError) throw replayError;
  return header;
}

/** `runlog replay --file`: checks the file whole, then replays it again as it prints (memory: one actor's state). */
export async function replayHistoryFile(io: Io, path: string, options: { step: boolean; to: number | undefined; upcasters?: UpcasterRegistry; id?: string }): Promise<void> {
  const upcasters = options.upcasters ?? defaultUpcasters();
  const header = await checkHistoryFile(path, { upcasters, ...(options.to !== undefined ? { to: options.to } : {}), ...(options.id !== undefined ? { id: options.id } : {}) });
  const lifted = async function* (): AsyncGenerator<RecordedEvent> {
    for await (const e of historyEvents(path, header, options.id)) {
      if (options.to !== undefined && e.version > options.to) return; // past --to: not lifted, not even read on
      yield liftEvent(header.kind, e, upcasters);
    }
  };
  await printReplayStream(io, { kind: header.kind, id: header.id, version: header.version }, lifted(), options);
}

/** `runlog replay <id>`: the actor's events read from the log a page at a time, printed as they are folded. */
export async function replayFromLog(io: Io, store: ReadableLog, id: string, options: { step: boolean; to: number | undefined }): Promise<void> {
  const ref = resolveActor(store, id);
  const version = store.streamVersion(ref.stream);
  if (options.to !== undefined && options.to > version) throw new ReplayToInvalidError(ref.id, version, options.to);
  // State at a version: from the newest usable snapshot at or before it (snapshots.ts), folding only the events
  // after it; the transitions before the snapshot are not printed (replay without --to prints them all).
  const cached = options.to !== undefined ? store.snapshotAtOrBefore?.(ref.stream, options.to) : undefined;
  const restored = cached ? decodeSnapshot(machines[ref.kind], cached) : null;
  const start = restored ? { version: cached!.version, snapshot: restored } : undefined;
  const events = store.iterateEvents({ stream: ref.stream, ...(start ? { from: start.version + 1 } : {}), ...(options.to !== undefined ? { to: options.to } : {}) });
  await printReplayStream(io, { kind: ref.kind, id: ref.id, version }, events, { ...options, ...(start ? { start } : {}) });
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

/** One step as `runlog replay` prints it (changes: with --step, what changed in the context since the step before). */
function printStep(io: Io, kind: ActorKind, s: Step, changes: ContextChange[] | null): void {
  if (!changes) {
    const mark = s.accepted ? '' : '  (not accepted)';
    const fx = s.effects.length ? `  effects: ${s.effects.map((e) => e.type).join(', ')}` : '';
    io.out(`v${String(s.version).padEnd(4)} ${s.event.at}  ${s.event.type.padEnd(28)} ${s.from} → ${s.to}${fx}${mark}`);
    return;
  }
  const rejected = s.event.type === rejectedType(kind) ? (s.event.data as { rejected?: { type?: string }; state?: string }) : null;
  const title = rejected ? `${s.event.type} (${rejected.rejected?.type ?? '?'} was refused in ${rejected.state ?? '?'})` : s.event.type;
  io.out(`v${s.version}  ${s.event.at}  ${title}`);
  io.out(`    ${s.from} → ${s.to}${s.accepted ? '' : '   (not accepted: nothing changed)'}`);
  if (s.effects.length > 0) io.out(`    effects: ${s.effects.map((e) => `${e.type}${Object.keys(e.params).length ? ` ${truncate(JSON.stringify(e.params), 80)}` : ''}`).join('\n             ')}`);
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
  let prev: Record<string, unknown> = start ? (start.snapshot.context as Record<string, unknown>) : initialMachineContext(actor.kind);
  let last: Step | undefined;
  let first = true;
  // From a snapshot: `from` is the version it stands at, and steps begin after it.
  if (io.json) io.out(`{"id":${JSON.stringify(actor.id)},"kind":${JSON.stringify(actor.kind)},"version":${actor.version},${start ? `"from":${start.version},` : ''}"steps":[`);
  else if (start) io.out(`v1–v${start.version}: from the snapshot at v${start.version} (${stateName(start.snapshot)}); replay without --to prints every transition`);
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
  if (options.to !== undefined) io.out(`${options.step ? '' : '\n'}at v${to}: ${state}\ncontext:\n${JSON.stringify(context, null, 2)}`);
}
