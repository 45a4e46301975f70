// The actors rows (what ps lists) a PostgreSQL supervisor's store keeps beside its copy of the log (host-store.ts).
// PostgreSQL folds the actors projection in each append's transaction; the store keeps in memory the rows of the
// actors that have not ended, and of ended ones whose events its copy still holds, so ps and the host read them
// without a query: the host's own row for its own appends (the two agree), the stored document for events other
// processes wrote (read back when the follower sees them). Every other ended actor's row is read from PostgreSQL
// when asked for (ps --all, inspect): memory follows the live fleet, not the history. Kept apart from the store
// because the rows have their own queries, their own shape and their own reads, and the copy needs only to hear
// which have ended.
import type { ActorFilter, ActorRow } from '../port.ts';
import type { PgEventStore } from './event-store.ts';
import type { PgHostStoreOptions } from './host-store-options.ts';

/** An actors-projection document with, for an archived actor, where its events went (tombstones, postgres/schema.ts migration 5). */
const rowSelect = (
  doc: string,
): string => `SELECT ${doc} AS doc, a.file AS archived_to, a.created_at AS archived_at FROM projection_documents d
  LEFT JOIN tombstones t ON t.stream = d.id LEFT JOIN archives a ON a.id = t.archive`;
type RowDoc = { doc: unknown; archived_to: string | null; archived_at: string | null };
/** The predicate of the partial index of the actors that have not ended (postgres/schema.ts migration 10), verbatim. */
const UNENDED = `(d.doc->>'status') <> 'terminal'`;

export class ActorRowsCopy {
  /** The projection whose documents are the rows (default `actors`). */
  readonly projection: string;
  private readonly rows = new Map<string, ActorRow>();
  private readonly toRow: (doc: unknown) => ActorRow;
  /**
   * The rows' query. With the default toRow (which drops `snapshot` and `rev`) the server drops them: an actor's
   * persisted machine snapshot is most of its document, and reading every ended actor's at open cost more than
   * the events did (store.pg.open).
   */
  private readonly rowSelect: string;

  constructor(
    private readonly pg: PgEventStore,
    actorRows: PgHostStoreOptions['actorRows'],
    /** Hears of each row that says its actor ended (the copy pages out ended actors' events). */
    private readonly ended: (stream: string) => void,
    /** Whether the copy holds some of the stream's events (an ended actor's row is kept only while it does). */
    private readonly held: (stream: string) => boolean,
  ) {
    this.projection = actorRows?.projection ?? 'actors';
    // The default row is the document without `snapshot` and `rev`, and the server drops both (one jsonb delete
    // of the two keys: two deletes rebuilt each document twice): the document read is the row, copied no more.
    this.toRow = actorRows?.toRow ?? ((doc: unknown) => doc as ActorRow);
    this.rowSelect = rowSelect(actorRows?.toRow ? 'd.doc' : "d.doc - '{snapshot,rev}'::text[]");
  }

  /**
   * Reads the rows of the actors that have not ended (directly: a one-shot reader registers no projection with the
   * store), through the partial index of postgres/schema.ts migration 10: the open does not grow with the ended.
   * Each row is kept as it arrives, never gathered into a result.
   */
  async load(): Promise<void> {
    await this.pg.eachRow<RowDoc>(`${this.rowSelect} WHERE d.projection = $1 AND ${UNENDED}`, [this.projection], (d) =>
      this.putRow(d),
    );
  }

  /** Reads the rows again, in place of those held (after the projection was rebuilt). */
  async reload(): Promise<void> {
    const held = [...this.rows.keys()].filter((stream) => this.held(stream));
    const docs: RowDoc[] = [];
    const keep = (d: RowDoc) => void docs.push(d);
    await this.pg.eachRow<RowDoc>(`${this.rowSelect} WHERE d.projection = $1 AND ${UNENDED}`, [this.projection], keep);
    await this.pg.eachRow<RowDoc>(
      `${this.rowSelect} WHERE d.projection = $1 AND d.id = ANY($2::text[])`,
      [this.projection, held],
      keep,
    );
    this.rows.clear();
    for (const d of docs) this.putRow(d);
  }

  /** Reads the streams' rows again (events other processes wrote, or an archive that moved them). */
  async refresh(streams: Set<string>): Promise<void> {
    if (streams.size === 0) return;
    for (const d of await this.pg.sql<RowDoc>(`${this.rowSelect} WHERE d.projection = $1 AND d.id = ANY($2::text[])`, [
      this.projection,
      [...streams],
    ]))
      this.putRow(d);
  }

  private putRow(d: RowDoc): void {
    this.set(this.toStoredRow(d));
  }

  /** A stored document as a row, with where its events went when archived. */
  private toStoredRow(d: RowDoc): ActorRow {
    const row = this.toRow(d.doc);
    return d.archived_to ? { ...row, archived: { file: d.archived_to, at: d.archived_at! } } : row;
  }

  /** How many rows are held in memory. */
  get size(): number {
    return this.rows.size;
  }

  /** The host's word for the row after its append. An ended actor's row is kept while the copy holds its events. */
  set(row: ActorRow): void {
    if (row.status === 'terminal' && !this.held(row.stream)) {
      this.rows.delete(row.stream);
      return;
    }
    this.rows.set(row.stream, row);
    if (row.status === 'terminal') this.ended(row.stream);
  }

  /** The copy dropped the stream (an ended actor's): its row is read from PostgreSQL from now on. */
  forget(stream: string): void {
    this.rows.delete(stream);
  }

  get(stream: string): ActorRow | undefined {
    return this.rows.get(stream);
  }

  /** The streams of the actors still active. */
  live(): string[] {
    return [...this.rows.values()].filter((r) => r.status === 'active').map((r) => r.stream);
  }

  /** The rows ps lists: the held ones, and with `all` every ended actor's from PostgreSQL (the held row wins). */
  async list(filter: ActorFilter): Promise<ActorRow[]> {
    const rows = new Map<string, ActorRow>();
    if (filter.all)
      await this.pg.eachRow<RowDoc>(`${this.rowSelect} WHERE d.projection = $1`, [this.projection], (d) => {
        const row = this.toStoredRow(d);
        rows.set(row.stream, row);
      });
    for (const r of this.rows.values()) rows.set(r.stream, r);
    return [...rows.values()]
      .filter((r) => (!filter.kind || r.kind === filter.kind) && (filter.all || r.status === 'active'))
      .sort((a, b) =>
        a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0,
      );
  }

  /** An actor's row by its id (an instance's or an execution's): held, or read from PostgreSQL. */
  async find(id: string): Promise<ActorRow | undefined> {
    const streams = [`instance-${id}`, `execution-${id}`];
    const held = this.rows.get(streams[0]!) ?? this.rows.get(streams[1]!);
    if (held) return held;
    const docs = await this.pg.sql<RowDoc>(`${this.rowSelect} WHERE d.projection = $1 AND d.id = ANY($2::text[])`, [
      this.projection,
      streams,
    ]);
    const rows = docs.map((d) => this.toStoredRow(d));
    return rows.find((r) => r.stream === streams[0]) ?? rows.find((r) => r.stream === streams[1]);
  }
}
