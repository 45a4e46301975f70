// One archived actor's events, copied from a SQLite log into the archive file (sqlite/archive.ts): read a page at a
// time in version order as raw rows with data and meta as the stored JSON text (what their chain links hashed), each
// checked against its neighbours and the recorded holes around it (../archive/archive-ledger.ts), then written with
// its link. Kept apart from the run because this is the file's content, event by event; the run around it plans,
// removes in one transaction and gives the space back.
import type Database from 'better-sqlite3';
import type { ArchiveFileWriter } from '../archive/archive-file.ts';
import type { ArchiveLedger } from '../archive/archive-ledger.ts';
import { CHAIN_COLUMNS, rowHash, type ChainRow } from '../chain.ts';

/** Copies archived actors' events, with the statements it reads them by prepared once per run. */
export class ActorEventCopier {
  private readonly page: Database.Statement<[string, number], ChainRow>;
  private readonly at: Database.Statement<[number], { stream: string; hash: Buffer }>;
  private readonly gapAt: Database.Statement<[number], { from: number; hash: Buffer }>;
  private readonly gapAfter: Database.Statement<[number], { seq: number; from: number; hash: Buffer }>;

  constructor(db: Database.Database) {
    this.page = db
      .prepare(`SELECT ${CHAIN_COLUMNS} FROM events WHERE stream = ? AND version > ? ORDER BY version LIMIT 1024`)
      // why: raw(true) rows are arrays; better-sqlite3's types keep the object row type
      .raw(true) as unknown as Database.Statement<[string, number], ChainRow>;
    this.at = db.prepare('SELECT stream, hash FROM events WHERE seq = ?') as Database.Statement<
      [number],
      { stream: string; hash: Buffer }
    >;
    this.gapAt = db.prepare('SELECT from_seq AS "from", hash FROM chain_gaps WHERE seq = ?') as Database.Statement<
      [number],
      { from: number; hash: Buffer }
    >;
    this.gapAfter = db.prepare(
      'SELECT seq, from_seq AS "from", hash FROM chain_gaps WHERE seq > ? ORDER BY seq LIMIT 1',
    ) as Database.Statement<[number], { seq: number; from: number; hash: Buffer }>;
  }

  /** Writes every event of `stream` into the archive, a page at a time, as the ledger links them. */
  copy(out: ArchiveFileWriter, ledger: ArchiveLedger, stream: string): void {
    for (;;) {
      const rows = this.page.all(stream, ledger.version);
      for (const r of rows) {
        const [seq, , version, type, schema, when, data, meta, hash] = r;
        const around = {
          before: seq > 1 ? this.at.get(seq - 1) : undefined,
          gapBefore: this.gapAt.get(seq - 1)?.hash,
          next: this.at.get(seq + 1),
        };
        const { prev, needsGapAfter } = ledger.event({ seq, version, hash }, around, (link) => rowHash(link, r));
        out.event({
          seq,
          stream,
          version,
          type,
          schema,
          at: when,
          data,
          meta,
          hash: hash!,
          ...(prev ? { prev } : {}),
        });
        if (needsGapAfter) ledger.gapAfter(seq, this.gapAfter.get(seq));
      }
      if (rows.length < 1024) break;
    }
  }
}
