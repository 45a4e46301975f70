// The actors rows (what ps lists) a PostgreSQL supervisor's store keeps beside its copy of the log (host-store.ts).
// PostgreSQL folds the actors projection in each append's transaction; the store keeps its rows in memory so ps and
// the host read them without a query: the host's own row for its own appends (the two agree), the stored document
// for events other processes wrote (read back when the follower sees them). Kept apart from the store because the
// rows have their own query, their own shape and their own reads, and the copy needs only to hear which have ended.
import type { ActorFilter, ActorRow } from '../port.ts';
import type { PgEventStore } from './event-store.ts';
import type { PgHostStoreOptions } from './host-store-options.ts';

/** An actors-projection document with, for an archived actor, where its events went (tombstones, postgres/schema.ts migration 5). */
const rowSelect = (
  doc: string,
): string => `SELECT ${doc} AS doc, a.file AS archived_to, a.created_at AS archived_at FROM projection_documents d
  LEFT JOIN tombstones t ON t.stream = d.id LEFT JOIN archives a ON a.id = t.archive`;
type RowDoc = { doc: unknown; archived_to: string | null; archived_at: string | null };

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
  ) {
    this.projection = actorRows?.projection ?? 'actors';
    // The default row is the document without `snapshot` and `rev`, and the server drops both (one jsonb delete
    // of the two keys: two deletes rebuilt each document twice): the document read is the row, copied no more.
    this.toRow = actorRows?.toRow ?? ((doc: unknown) => doc as ActorRow);
    this.rowSelect = rowSelect(actorRows?.toRow ? 'd.doc' : "d.doc - '{snapshot,rev}'::text[]");
  }

  /**
   * Reads every row (directly: a one-shot reader registers no projection with the store). Each row is kept as it
   * arrives, never gathered into a result.
   */
  async load(): Promise<void> {
    await this.pg.eachRow<RowDoc>(`${this.rowSelect} WHERE d.projection = $1`, [this.projection], (d) =>
      this.putRow(d),
    );
  }

  /** Reads every row again, in place of those held (after the projection was rebuilt). */
  async reload(): Promise<void> {
    const docs: RowDoc[] = [];
    await this.pg.eachRow<RowDoc>(
      `${this.rowSelect} WHERE d.projection = $1`,
      [this.projection],
      (d) => void docs.push(d),
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
    const row = this.toRow(d.doc);
    this.set(d.archived_to ? { ...row, archived: { file: d.archived_to, at: d.archived_at! } } : row);
  }

  /** The host's word for the row after its append. */
  set(row: ActorRow): void {
    this.rows.set(row.stream, row);
    if (row.status === 'terminal') this.ended(row.stream);
  }

  get(stream: string): ActorRow | undefined {
    return this.rows.get(stream);
  }

  /** The streams of the actors still active. */
  live(): string[] {
    return [...this.rows.values()].filter((r) => r.status === 'active').map((r) => r.stream);
  }

  list(filter: ActorFilter): ActorRow[] {
    return [...this.rows.values()]
      .filter((r) => (!filter.kind || r.kind === filter.kind) && (filter.all || r.status === 'active'))
      .sort((a, b) =>
        a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0,
      );
  }

  /** An actor's row by its id (an instance's or an execution's). */
  find(id: string): ActorRow | undefined {
    return this.rows.get(`instance-${id}`) ?? this.rows.get(`execution-${id}`);
  }
}
