// Checking the archives a log's retention wrote (sqlite/archive.ts), for `runlog verify`: each archive the log
// recorded is read back and checked on its own (its bytes against the SHA-256 recorded when it was written,
// every event line against its chain link, its trailer) and against the log (the tombstones that point at it,
// and the hash each hole it left in the chain ends on, kept in chain_gaps). An archive moved away is not damage
// (where archives go is the operator's choice): it is named as not checked, and `--archives <dir>` says where
// to look.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { eventHash, type ChainedEventFields } from '../chain.ts';
import type { ArchiveFinding } from '../capabilities.ts';
import type { SqliteEventStore } from '../sqlite/event-store.ts';

export type { ArchiveFinding };

export interface ArchiveRow {
  id: number;
  file: string;
  actors: number;
  events: number;
  bytes: number;
  sha256: string;
  last_seq: number;
  last_hash: Buffer;
}

export interface TombstoneRow {
  stream: string;
  version: number;
  first_seq: number;
  last_seq: number;
}

interface EventLine extends ChainedEventFields {
  data: unknown;
  meta: unknown;
  hash: string;
  prev?: string;
}

/** Where the archive is: where it was written, else (moved) in one of `dirs` under its name. */
export function locate(file: string, dirs: readonly string[]): string | null {
  if (existsSync(file)) return file;
  for (const d of dirs) {
    const p = join(d, basename(file));
    if (existsSync(p)) return p;
  }
  return null;
}

/**
 * One check of a log's recorded archives (SQLite's below, PostgreSQL's in postgres/archive-check.ts): what it found,
 * and how many it checked.
 */
export class ArchiveCheckRun {
  private readonly findings: ArchiveFinding[] = [];
  private checked = 0;
  constructor(private readonly dirs: readonly string[]) {}

  /** Where archive `a` is, to be checked there; null (and named as not checked) when it is not found. */
  locate(a: ArchiveRow): string | null {
    const where = locate(a.file, this.dirs);
    if (!where) {
      this.findings.push({
        code: 'ARCHIVE_NOT_FOUND',
        severity: 'warning',
        file: a.file,
        message:
          `archive ${a.file} (${a.actors} actors, ${a.events} events) is not there and was not checked; ` +
          'runlog verify --archives <dir> looks for it by name',
      });
      return null;
    }
    this.checked += 1;
    return where;
  }

  /** What checkOne() found in the archive at `where` (null: it is sound). */
  record(where: string, found: Problem | null): void {
    if (found)
      this.findings.push({
        code: 'ARCHIVE_DAMAGED',
        severity: 'damage',
        file: where,
        ...found,
        message: `archive ${where}: ${found.message}`,
      });
  }

  result(): { checked: number; findings: ArchiveFinding[] } {
    return { checked: this.checked, findings: this.findings };
  }
}

/** Checks every archive the log recorded; returns what is wrong (empty: every archive found is sound). */
export function checkArchives(
  store: SqliteEventStore,
  options: { dirs?: readonly string[] } = {},
): { checked: number; findings: ArchiveFinding[] } {
  const db = store.connection;
  const archives = db
    .prepare('SELECT id, file, actors, events, bytes, sha256, last_seq, last_hash FROM archives ORDER BY id')
    .all() as ArchiveRow[];
  const tombstones = db.prepare('SELECT stream, version, first_seq, last_seq FROM tombstones WHERE archive = ?');
  const gaps = new Map(
    (db.prepare('SELECT seq, hash FROM chain_gaps').all() as { seq: number; hash: Buffer }[]).map((g) => [
      g.seq,
      g.hash.toString('hex'),
    ]),
  );
  const logHash = db.prepare('SELECT hash FROM events WHERE seq = ?');
  const linkInLog = (seq: number): string | undefined => {
    const r = logHash.get(seq) as { hash: Buffer | null } | undefined;
    return r?.hash ? r.hash.toString('hex') : gaps.get(seq);
  };
  const run = new ArchiveCheckRun(options.dirs ?? []);
  for (const a of archives) {
    const where = run.locate(a);
    if (where) run.record(where, checkOne(where, a, tombstones.all(a.id) as TombstoneRow[], gaps, linkInLog));
  }
  return run.result();
}

type Problem = { message: string; seq?: number; stream?: string; version?: number };

/**
 * The first thing wrong with one archive, or null (the store's records of it passed in: SQLite's above, PostgreSQL's
 * in postgres/archive-check.ts).
 */
export function checkOne(
  file: string,
  a: ArchiveRow,
  tombs: TombstoneRow[],
  gaps: Map<number, string>,
  linkInLog: (seq: number) => string | undefined,
): Problem | null {
  const bytes = readFileSync(file);
  const digest = createHash('sha256').update(bytes).digest('hex');
  const sameBytes = digest === a.sha256 && bytes.length === a.bytes;
  let text: string;
  try {
    text = gunzipSync(bytes).toString('utf8');
  } catch (err) {
    return {
      message:
        `not a readable gzip file (${(err as Error).message}); ` +
        `${sameBytes ? '' : 'its bytes differ from those recorded when it was written'}`,
    };
  }
  const lines = text.split('\n').filter((l) => l.length > 0);
  const events: EventLine[] = [];
  const raw = new Map<number, string>();
  const byStream = new Map<string, { first: number; last: number; events: number }>();
  type Trailer = { actors?: number; events?: number; lastSeq?: number; lastHash?: string };
  let trailer: Trailer | null = null;
  let histories = 0;
  for (const [i, line] of lines.entries()) {
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return { message: `line ${i + 1} is not JSON (the file is cut short or changed)` };
    }
    if (v.runlog === 'history') histories += 1;
    else if (v.runlog === 'archive-end') trailer = v as Trailer;
    else if (typeof v.seq === 'number') {
      // why: an event line as sqlite/archive.ts writes it; a changed one fails its hash below
      const e = v as unknown as EventLine;
      events.push(e);
      raw.set(e.seq, line);
      const s = byStream.get(e.stream) ?? { first: e.seq, last: e.seq, events: 0 };
      s.first = Math.min(s.first, e.seq);
      s.last = Math.max(s.last, e.seq);
      s.events += 1;
      byStream.set(e.stream, s);
    }
  }
  // Every event against its link: the one before it in the archive, or the `prev` its line carries (which must
  // be the log's link there, when the log still has it).
  const hashes = new Map(events.map((e) => [e.seq, e.hash]));
  for (const e of events) {
    const at = { seq: e.seq, stream: e.stream, version: e.version };
    const prev = e.prev ?? hashes.get(e.seq - 1);
    if (prev === undefined)
      return { ...at, message: `the link before seq ${e.seq} is neither in the archive nor on its line` };
    const link = (data: string, meta: string): string =>
      eventHash(Buffer.from(prev, 'hex'), e.seq, e.stream, e.version, e.type, e.schema, e.at, data, meta).toString(
        'hex',
      );
    // data and meta as the log held them: SQLite's JSON text is JSON.stringify's; PostgreSQL's is its jsonb text,
    // which the line carries verbatim (another spacing and key order), so that text is hashed as it stands.
    if (
      link(JSON.stringify(e.data), JSON.stringify(e.meta)) !== e.hash &&
      link(...rawDataMeta(raw.get(e.seq) ?? '')) !== e.hash
    )
      return {
        ...at,
        message: `the event at seq ${e.seq} (${e.stream} v${e.version}) does not match its hash (changed after it was archived)`,
      };
    if (e.prev !== undefined && e.seq > 1) {
      const inLog = linkInLog(e.seq - 1);
      if (inLog !== undefined && !hashes.has(e.seq - 1) && inLog !== e.prev)
        return {
          ...at,
          message: `the event at seq ${e.seq} does not link to the log's event before it (seq ${e.seq - 1})`,
        };
    }
    const gap = gaps.get(e.seq);
    if (gap !== undefined && gap !== e.hash)
      return {
        ...at,
        message: `the log recorded the hole its archived events left as ending on another hash at seq ${e.seq}`,
      };
  }
  if (!trailer) return { message: 'it has no trailer (the file is cut short)' };
  const recordedLast = a.last_hash.toString('hex');
  if (trailer.lastSeq !== a.last_seq || trailer.lastHash !== recordedLast || hashes.get(a.last_seq) !== recordedLast) {
    return {
      seq: a.last_seq,
      message: `it does not end on the link the log recorded for it (seq ${a.last_seq}, ${recordedLast.slice(0, 16)}…)`,
    };
  }
  if (
    trailer.events !== a.events ||
    events.length !== a.events ||
    trailer.actors !== a.actors ||
    histories !== a.actors
  ) {
    return {
      message: `it holds ${events.length} events of ${histories} actors; the log recorded ${a.events} of ${a.actors}`,
    };
  }
  for (const t of tombs) {
    const s = byStream.get(t.stream);
    if (!s || s.events !== t.version || s.first !== t.first_seq || s.last !== t.last_seq) {
      return {
        stream: t.stream,
        message:
          `${t.stream}'s tombstone says v${t.version} (seqs ${t.first_seq}..${t.last_seq}) went here, ` +
          `the archive holds ${s ? `${s.events} events (seqs ${s.first}..${s.last})` : 'none of it'}`,
      };
    }
  }
  if (!sameBytes)
    return {
      message:
        'its bytes differ from those recorded when it was written ' +
        `(sha256 ${digest.slice(0, 16)}…, recorded ${a.sha256.slice(0, 16)}…), though every event in it checks`,
    };
  return null;
}

/** The end (exclusive) of the JSON object or array starting at `i` in `text` (-1: none). */
function valueEnd(text: string, i: number): number {
  let depth = 0;
  for (let k = i; k < text.length; k++) {
    const c = text[k];
    if (c === '"') {
      for (k += 1; k < text.length && text[k] !== '"'; k++) if (text[k] === '\\') k += 1;
    } else if (c === '{' || c === '[') depth += 1;
    else if (c === '}' || c === ']') {
      depth -= 1;
      if (depth === 0) return k + 1;
    }
  }
  return -1;
}

/**
 * The data and meta texts exactly as an event line holds them. The line is written `…,"schema":n,"data":{…},"meta":{…},…`
 * and every string before data is JSON-escaped (a raw `"` cannot occur in it), so the first `,"data":` is the field.
 */
function rawDataMeta(line: string): [string, string] {
  const d = line.indexOf(',"data":');
  if (d < 0) return ['', ''];
  const dStart = d + 8;
  const dEnd = valueEnd(line, dStart);
  if (dEnd < 0 || !line.startsWith(',"meta":', dEnd)) return ['', ''];
  const mEnd = valueEnd(line, dEnd + 8);
  return mEnd < 0 ? ['', ''] : [line.slice(dStart, dEnd), line.slice(dEnd + 8, mEnd)];
}
