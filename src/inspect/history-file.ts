// History files: reading what `runlog export` writes (one actor's history) and what `runlog archive` writes (many,
// gzipped), a line at a time. Every malformed line is listed, not only the first.
import { closeSync, createReadStream, openSync, readFileSync, readSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { createGunzip } from 'node:zlib';
import { NotFoundError, ReplayError, UsageError, ValidationError } from '../domain/errors.ts';
import { streamName, type ActorKind, type RecordedEvent } from '../domain/events.ts';
import { HISTORY_FORMAT, type History, type HistoryHeader } from '../domain/history.ts';

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const KINDS: readonly ActorKind[] = ['instance', 'execution'];

/** Line 1 of a history: its header, or the error that says why it is not one. */
export function parseHeaderLine(line: string | undefined, source: string): HistoryHeader {
  if (line === undefined)
    throw new ValidationError('HISTORY_INVALID', `${source} is empty (expected a header line from runlog export)`);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(line);
  } catch {
    throw new ValidationError(
      'HISTORY_INVALID',
      `${source} line 1 is not JSON: it should be the header {"runlog":"history",…} that runlog export writes`,
    );
  }
  const hi: string[] = [];
  if (!isPlainObject(header) || header.runlog !== 'history') {
    throw new ValidationError(
      'HISTORY_INVALID',
      `${source} line 1 is not a runlog history header ({"runlog":"history",…})`,
    );
  }
  const format = header.format ?? 1;
  if (typeof format !== 'number' || !Number.isInteger(format) || format < 1)
    hi.push(`header: format must be a positive whole number`);
  else if (format > HISTORY_FORMAT) {
    throw new ReplayError(
      `${source} has history format ${format}; this runlog reads up to format ${HISTORY_FORMAT}. Upgrade runlog.`,
      { format, supported: HISTORY_FORMAT },
    );
  }
  if (!KINDS.includes(header.kind as ActorKind))
    hi.push(`header: kind must be one of ${KINDS.join(', ')}, not ${JSON.stringify(header.kind)}`);
  if (typeof header.id !== 'string' || header.id === '') hi.push('header: id must be a non-empty string');
  if (typeof header.version !== 'number' || !Number.isInteger(header.version) || header.version < 0)
    hi.push('header: version must be a whole number');
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
export function parseEventLine(raw: string, n: number, stream: string): RecordedEvent | string {
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
  if (e.version !== expected)
    problems.push(
      `version is ${JSON.stringify(e.version)}, expected ${expected} (events must be complete and in order)`,
    );
  if (typeof e.type !== 'string' || e.type === '') problems.push('type must be a non-empty string');
  if (typeof e.schema !== 'number' || !Number.isInteger(e.schema) || e.schema < 1)
    problems.push('schema must be a whole number ≥ 1');
  if (!isPlainObject(e.data)) problems.push('data must be an object');
  if (typeof e.at !== 'string' || Number.isNaN(Date.parse(e.at))) problems.push('at must be an ISO timestamp');
  if (e.meta !== undefined && !isPlainObject(e.meta)) problems.push('meta must be an object');
  if (e.seq !== undefined && (typeof e.seq !== 'number' || !Number.isInteger(e.seq)))
    problems.push('seq must be a whole number');
  if (e.stream !== undefined && e.stream !== stream)
    problems.push(`stream is ${JSON.stringify(e.stream)}, not the header's ${stream}`);
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
export class IssueList {
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
  if (!issues.empty)
    throw new ValidationError('HISTORY_INVALID', `${source} is not a valid runlog history`, issues.all());
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
    if (code.startsWith('Z_') || code === 'ERR_BUFFER_TOO_LARGE')
      throw new ValidationError(
        'HISTORY_INVALID',
        `${path} is not a complete gzip file (${(err as Error).message}): truncated or damaged`,
      );
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
export async function* historyLines(path: string, id: string | undefined): AsyncGenerator<string> {
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
        throw new UsageError(
          `${path} is an archive${count}: name the actor to replay (runlog replay --file ${path} <id>)`,
        );
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
export async function* historyEvents(
  path: string,
  header: HistoryHeader,
  id: string | undefined,
): AsyncGenerator<RecordedEvent> {
  let n = 0;
  for await (const line of historyLines(path, id)) {
    n += 1;
    if (n === 1) continue;
    const r = parseEventLine(line, n, header.stream);
    if (typeof r === 'string')
      throw new ValidationError('HISTORY_INVALID', `${path} changed while it was replayed`, [r]);
    yield r;
  }
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
