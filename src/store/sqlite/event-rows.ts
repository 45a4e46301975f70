// The rows an append writes into `events`, several to an INSERT (append-writer.ts). Each run of a statement costs a
// call into the driver and back (its arguments bound, a step, a reset, a result object) whatever it writes, so an
// append of a hundred events paid that a hundred times. An append's rows share their stream and take consecutive
// seqs and versions: a statement binds those once, for its first row, and counts on from there. The rows go in in
// the order they were added, and the writer writes those it holds before anything that may throw (see AppendWriter),
// so a failed append fails as it did.
import type { Database } from './driver.ts';

/** Rows per INSERT, largest first: the rows held are written in as few runs as these sizes allow. */
const SIZES = [32, 16, 8, 4, 2, 1] as const;
/** The values a row binds of its own: type, schema, data, meta, at, hash. */
const OWN = 6;

/** Where the next statement's first row goes: named parameters, bound once per statement. */
interface Place {
  stream: string;
  seq: number;
  version: number;
}

export class EventRows {
  /** The INSERT of n rows, prepared when first needed (most appends hold one event). */
  private readonly inserts = new Map<number, Database.Statement<unknown[]>>();
  /** The rows held, their own values one after another. */
  private values: unknown[] = [];
  private readonly place: Place = { stream: '', seq: 0, version: 0 };

  constructor(private readonly db: Database.Database) {}

  /** Starts an append's rows: the first one's stream, seq and version (each next row has the next seq and version). */
  start(stream: string, seq: number, version: number): void {
    this.values = [];
    this.place.stream = stream;
    this.place.seq = seq;
    this.place.version = version;
  }

  /** Holds the next row; a full statement's worth is written at once. */
  add(type: string, schema: number, data: string, meta: string, at: string, hash: Buffer): void {
    this.values.push(type, schema, data, meta, at, hash);
    if (this.values.length === SIZES[0] * OWN) this.write();
  }

  /** Writes every row held. */
  write(): void {
    const values = this.values;
    // Cleared first: a write that throws rolls its transaction back, and no later write may hold these rows.
    this.values = [];
    let from = 0;
    for (const size of SIZES) {
      const n = size * OWN;
      for (; values.length - from >= n; from += n) {
        this.insert(size).run(n === values.length ? values : values.slice(from, from + n), this.place);
        this.place.seq += size;
        this.place.version += size;
      }
    }
  }

  private insert(rows: number): Database.Statement<unknown[]> {
    let stmt = this.inserts.get(rows);
    if (!stmt) {
      const values = Array.from(
        { length: rows },
        (_, k) => `(@seq + ${k}, @stream, @version + ${k}, ?, ?, ?, ?, ?, ?)`,
      );
      stmt = this.db.prepare(
        `INSERT INTO events (seq, stream, version, type, schema, data, meta, at, hash) VALUES ${values.join(', ')}`,
      );
      this.inserts.set(rows, stmt);
    }
    return stmt;
  }
}
