// Reading a SQLite log's events a page at a time: recorded events (upcast), replay's lean rows, and the stored JSON
// text for the SSE catch-up. Each page query is prepared on first use.
import type { RecordedEvent, ReplayEvent } from '../../domain/events.ts';
import type { Database } from './driver.ts';
import type { UpcasterRegistry } from '../upcasters.ts';
import type { IterateEventsOptions } from './engine-types.ts';

export type { IterateEventsOptions };

export interface EventRow {
  seq: number;
  stream: string;
  version: number;
  type: string;
  schema: number;
  data: string;
  meta: string;
  at: string;
}

/** A row of iterateReplay's query, in `.raw()` form: seq, stream, version, type, schema, data, at. */
type ReplayRow = [number, string, number, string, number, string, string];

export class EventPages {
  /** The page queries of the recorded-event reads, prepared on first use. */
  private streamQuery: Database.Statement<[string, number, number, number], EventRow> | undefined;
  private logQuery: Database.Statement<[number, number, number], EventRow> | undefined;
  private jsonPage: Database.Statement<[number, number], EventRow> | undefined;
  /** iterateReplay's page query, prepared on first use. */
  private replayPage: Database.Statement<[number, number], ReplayRow> | undefined;

  constructor(
    private readonly db: Database.Database,
    private readonly upcasters: UpcasterRegistry,
  ) {}

  toRecorded(r: EventRow): RecordedEvent {
    const { schema, data } = this.upcasters.upcast(r.type, r.schema, JSON.parse(r.data));
    // Most events carry no metadata: skip parsing the empty object (replay reads millions of rows).
    const meta = r.meta === '{}' ? {} : (JSON.parse(r.meta) as Record<string, unknown>);
    return { seq: r.seq, stream: r.stream, version: r.version, type: r.type, schema, data, meta, at: r.at };
  }

  /**
   * The whole log in seq order as replay reads it (`foldLog`, `rebuild`): each event's stream, version and
   * machine event, upcast, without materialising the log. Rows are fetched in pages (better-sqlite3's `all()` is
   * several times cheaper per row than stepping `iterate()`), as arrays of only the columns replay needs (never
   * `meta`), and data already at its type's current schema skips the upcaster.
   *
   * Pages are small: under a fold a page of rows stays live while the fold's garbage triggers scavenges, and at
   * 4096 rows the extra survivors cost more GC time than the fewer queries save.
   */
  *replay(afterSeq = 0, pageSize = 512): IterableIterator<ReplayEvent> {
    // why: raw(true) rows are arrays; better-sqlite3's types keep the object row type
    this.replayPage ??= this.db
      .prepare('SELECT seq, stream, version, type, schema, data, at FROM events WHERE seq > ? ORDER BY seq LIMIT ?')
      .raw(true) as unknown as Database.Statement<[number, number], ReplayRow>;
    const upcasters = this.upcasters;
    let cursor = afterSeq;
    for (;;) {
      const page = this.replayPage.all(cursor, pageSize);
      for (const r of page) {
        const type = r[3];
        let data = JSON.parse(r[5]) as Record<string, unknown>;
        if (!upcasters.isCurrent(type, r[4])) data = upcasters.upcast(type, r[4], data).data;
        yield { stream: r[1], version: r[2], type, at: r[6], data };
      }
      if (page.length < pageSize) return;
      cursor = page[page.length - 1]![0];
    }
  }

  /**
   * Recorded events read a page at a time (`runlog events` prints them as they come, never holding the log):
   * the whole log in seq order (`afterSeq`, `toSeq`), or one stream in version order (`from`, `to`).
   */
  *events(options: IterateEventsOptions = {}): IterableIterator<RecordedEvent> {
    const pageSize = options.pageSize ?? 512;
    if (options.stream !== undefined) {
      const to = options.to ?? Number.MAX_SAFE_INTEGER;
      let from = options.from ?? 1;
      for (;;) {
        const page = this.streamPage(options.stream, from, to, pageSize);
        yield* page;
        if (page.length < pageSize) return;
        from = page[page.length - 1]!.version + 1;
      }
    }
    const toSeq = options.toSeq ?? Number.MAX_SAFE_INTEGER;
    let cursor = options.afterSeq ?? 0;
    for (;;) {
      const page = this.logPage(cursor, toSeq, pageSize);
      yield* page;
      if (page.length < pageSize) return;
      cursor = page[page.length - 1]!.seq;
    }
  }

  /** At most `limit` events of the log with afterSeq < seq <= toSeq, in seq order. */
  logPage(afterSeq: number, toSeq: number, limit: number): RecordedEvent[] {
    this.logQuery ??= this.db.prepare('SELECT * FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?');
    return this.logQuery.all(afterSeq, toSeq, limit).map((r) => this.toRecorded(r));
  }

  /** At most `limit` of a stream's events with from <= version <= to, in version order. */
  streamPage(stream: string, from: number, to: number, limit: number): RecordedEvent[] {
    this.streamQuery ??= this.db.prepare(
      'SELECT * FROM events WHERE stream = ? AND version >= ? AND version <= ? ORDER BY version LIMIT ?',
    );
    return this.streamQuery.all(stream, from, to, limit).map((r) => this.toRecorded(r));
  }

  /**
   * The whole log after `afterSeq` as the JSON text of each recorded event (what `JSON.stringify` of `readAll`
   * gives), built from the stored text without parsing it again when the event is at its type's current schema.
   * For streaming many events to many readers (the SSE catch-up).
   */
  json(afterSeq: number, limit: number): { seq: number; json: string }[] {
    this.jsonPage ??= this.db.prepare('SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?');
    return this.jsonPage.all(afterSeq, limit).map((r) => {
      if (!this.upcasters.isCurrent(r.type, r.schema)) return { seq: r.seq, json: JSON.stringify(this.toRecorded(r)) };
      const json =
        `{"seq":${r.seq},"stream":${JSON.stringify(r.stream)},"version":${r.version},"type":${JSON.stringify(r.type)},` +
        `"schema":${r.schema},"data":${r.data},"meta":${r.meta},"at":${JSON.stringify(r.at)}}`;
      return { seq: r.seq, json };
    });
  }
}
