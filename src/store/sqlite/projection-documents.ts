// The documents of the projections registered with the port (projection_documents, migration 2): folded inside
// the append's transaction (the engine's inAppend hook), read by ProjectionReader, rebuilt from the whole log.
import type { RecordedEvent } from '../../domain/events.ts';
import { foldDocument, type ProjectionSet } from '../projection-set.ts';
import { toJson } from '../port.ts';
import type { Database } from './driver.ts';

/** Events folded per page while rebuilding (the documents stay in memory until written). */
const REBUILD_PAGE = 500;

export class ProjectionDocuments {
  private stmt:
    | {
        get: Database.Statement<[string, string], { doc: string }>;
        put: Database.Statement<[string, string, string]>;
        remove: Database.Statement<[string, string]>;
        list: Database.Statement<[string], { id: string; doc: string }>;
        clear: Database.Statement<[string]>;
      }
    | undefined;

  constructor(
    private readonly db: Database.Database,
    private readonly projections: ProjectionSet,
  ) {}

  /** Prepared on first use: a read-only open of a log from before migration 2 has no table until it is asked for. */
  private get q(): NonNullable<ProjectionDocuments['stmt']> {
    const db = this.db;
    this.stmt ??= {
      get: db.prepare('SELECT doc FROM projection_documents WHERE projection = ? AND id = ?'),
      put: db.prepare(
        'INSERT INTO projection_documents (projection, id, doc) VALUES (?, ?, ?) ' +
          'ON CONFLICT (projection, id) DO UPDATE SET doc = excluded.doc',
      ),
      remove: db.prepare('DELETE FROM projection_documents WHERE projection = ? AND id = ?'),
      list: db.prepare('SELECT id, doc FROM projection_documents WHERE projection = ? ORDER BY id'),
      clear: db.prepare('DELETE FROM projection_documents WHERE projection = ?'),
    };
    return this.stmt;
  }

  /** Folds one append's events into the documents they touch, in the caller's transaction (a throw rolls it back). */
  fold(events: readonly RecordedEvent[]): void {
    if (events.length === 0) return;
    const q = this.q;
    for (const t of this.projections.targets(events)) {
      const cur = q.get.get(t.projection.name, t.id);
      const next = foldDocument(t, cur ? JSON.parse(cur.doc) : null);
      if (next === null) q.remove.run(t.projection.name, t.id);
      else q.put.run(t.projection.name, t.id, toJson(next, `projection ${t.projection.name} document ${t.id}`));
    }
  }

  get<D>(name: string, id: string): D | undefined {
    const r = this.q.get.get(name, id);
    return r ? (JSON.parse(r.doc) as D) : undefined;
  }

  list<D>(name: string): { id: string; doc: D }[] {
    return this.q.list.all(name).map((r) => ({ id: r.id, doc: JSON.parse(r.doc) as D }));
  }

  /**
   * Recomputes one projection from the whole log, in the caller's transaction: folded in global order a page at a
   * time (`page` reads events after a position), then written over the old documents.
   */
  rebuild(
    name: string,
    page: (afterSeq: number, limit: number) => RecordedEvent[],
  ): { documents: number; events: number } {
    const p = this.projections.get(name);
    const q = this.q;
    const docs = new Map<string, unknown>();
    let events = 0;
    let after = 0;
    for (;;) {
      const rows = page(after, REBUILD_PAGE);
      for (const t of this.projections.targets(rows, p)) docs.set(t.id, foldDocument(t, docs.get(t.id) ?? null));
      events += rows.length;
      if (rows.length < REBUILD_PAGE) break;
      after = rows.at(-1)!.seq;
    }
    q.clear.run(name);
    let documents = 0;
    for (const [id, doc] of docs) {
      if (doc === null) continue;
      q.put.run(name, id, toJson(doc, `projection ${name} document ${id}`));
      documents += 1;
    }
    return { documents, events };
  }
}
