// The rows an append writes into `events`, several to an INSERT (append-writer.ts). Each run of a statement costs a
// call into the driver and back (a step, a reset, a result object) whatever it writes, and each value bound costs a
// crossing of its own, so an append of a hundred events paid both a hundred times over. An append's rows share
// their stream and take consecutive seqs and versions: a statement binds those once, for its first row, and counts
// on from there. Its rows' type and schema, and their meta and time, are bound once too when every row has the same
// (an append's events mostly share their time and an empty meta). A single row goes through the one-row INSERT, as
// every row once did. The rows go in in the order they were added, and the writer writes those it holds before
// anything that may throw (see AppendWriter), so a failed append fails as it did.
import type { Database } from './driver.ts';

/** Rows per INSERT, largest first: the rows held are written in as few runs as these sizes allow. */
const SIZES = [32, 16, 8, 4, 2, 1] as const;
/** A row as held: type, schema, data, meta, at, hash. */
const HELD = 6;
const TYPE = 0;
const SCHEMA = 1;
const DATA = 2;
const META = 3;
const AT = 4;
const HASH = 5;

/** The named parameters: where a statement's first row goes, and the values its rows share. */
interface Shared {
  stream: string;
  seq: number;
  version: number;
  type: unknown;
  schema: unknown;
  meta: unknown;
  at: unknown;
}

export class EventRows {
  /** The INSERTs by rows and by what they share, prepared when first needed (most appends hold one event). */
  private readonly inserts = new Map<string, Database.Statement<unknown[]>>();
  /** The rows held, one after another. */
  private values: unknown[] = [];
  private readonly shared: Shared = { stream: '', seq: 0, version: 0, type: '', schema: 0, meta: '', at: '' };

  constructor(
    private readonly db: Database.Database,
    /** The one-row INSERT (statements.ts), its values in column order. */
    private readonly one: Database.Statement<[number, string, number, string, number, string, string, string, Buffer]>,
  ) {}

  /** Starts an append's rows: the first one's stream, seq and version (each next row has the next seq and version). */
  start(stream: string, seq: number, version: number): void {
    this.values = [];
    this.shared.stream = stream;
    this.shared.seq = seq;
    this.shared.version = version;
  }

  /** Holds the next row; a full statement's worth is written at once. */
  add(type: string, schema: number, data: string, meta: string, at: string, hash: Buffer): void {
    this.values.push(type, schema, data, meta, at, hash);
    if (this.values.length === SIZES[0] * HELD) this.write();
  }

  /** Writes every row held. */
  write(): void {
    const values = this.values;
    // Cleared first: a write that throws rolls its transaction back, and no later write may hold these rows.
    this.values = [];
    let from = 0;
    for (const size of SIZES) {
      for (const n = size * HELD; values.length - from >= n; from += n) {
        this.run(values, from, size);
        this.shared.seq += size;
        this.shared.version += size;
      }
    }
  }

  /** One INSERT of `rows` held rows from `from`. */
  private run(values: unknown[], from: number, rows: number): void {
    const s = this.shared;
    if (rows === 1) {
      const row = values.slice(from, from + HELD) as [string, number, string, string, string, Buffer];
      this.one.run(s.seq, s.stream, s.version, ...row);
      return;
    }
    const end = from + rows * HELD;
    const kind = same(values, from, end, TYPE) && same(values, from, end, SCHEMA);
    const context = same(values, from, end, META) && same(values, from, end, AT);
    const own: unknown[] = [];
    for (let i = from; i < end; i += HELD) {
      if (!kind) own.push(values[i + TYPE], values[i + SCHEMA]);
      own.push(values[i + DATA]);
      if (!context) own.push(values[i + META], values[i + AT]);
      own.push(values[i + HASH]);
    }
    s.type = values[from + TYPE];
    s.schema = values[from + SCHEMA];
    s.meta = values[from + META];
    s.at = values[from + AT];
    this.insert(rows, kind, context).run(own, s);
  }

  private insert(rows: number, kind: boolean, context: boolean): Database.Statement<unknown[]> {
    const key = `${rows}${kind ? 'k' : ''}${context ? 'c' : ''}`;
    let stmt = this.inserts.get(key);
    if (!stmt) {
      const [type, schema] = kind ? ['@type', '@schema'] : ['?', '?'];
      const [meta, at] = context ? ['@meta', '@at'] : ['?', '?'];
      const values = Array.from(
        { length: rows },
        (_, k) => `(@seq + ${k}, @stream, @version + ${k}, ${type}, ${schema}, ?, ${meta}, ${at}, ?)`,
      );
      stmt = this.db.prepare(
        `INSERT INTO events (seq, stream, version, type, schema, data, meta, at, hash) VALUES ${values.join(', ')}`,
      );
      this.inserts.set(key, stmt);
    }
    return stmt;
  }
}

/** Whether every held row from `from` to `end` has the same value at `offset`. */
function same(values: unknown[], from: number, end: number, offset: number): boolean {
  const first = values[from + offset];
  for (let i = from + HELD; i < end; i += HELD) if (values[i + offset] !== first) return false;
  return true;
}
