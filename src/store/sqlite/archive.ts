// Retention: the events of actors that ended before a time move into a compressed archive and leave the log.
//
// The order makes a kill at any point harmless: (1) the archive is written to a temporary file, fsynced and linked
// into place complete; (2) one transaction then records the archive, leaves a tombstone per actor, records the
// chain's holes and deletes the events; (3) free pages are given back. Killed before (2) commits, the log is as it
// was (an archive file may remain, unreferenced: a later run writes another); after, the log is archived and its
// archive complete. Nothing is ever half removed: (2) is one transaction.
//
// The archive file (archive/archive-file.ts) is JSON lines, gzip: an archive header, then one history per actor exactly as
// `runlog export` writes it (`runlog replay --file <archive> <id>` reads it), then a trailer naming the chain link
// the archive ends on. Each event line carries its chain hash (and, where the event before it in the log is not in
// this archive, that event's hash as `prev`), and data and meta are the stored JSON text: the archive can be
// checked against its own chain.
import { RunlogError } from '../../domain/errors.ts';
import { ArchiveFileWriter } from '../archive/archive-file.ts';
import { ArchiveLedger } from '../archive/archive-ledger.ts';
import { GENESIS } from '../chain.ts';
import { ActorEventCopier } from './archive-events.ts';
import { logBytes } from './file-checks.ts';
import { readShutdownRecord, writeShutdownRecord } from './shutdown-record.ts';
import type { SqliteEventStore } from './event-store.ts';
import type { ActorDbRow } from './projection.ts';
import type Database from 'better-sqlite3';

import type { ArchiveOptions, ArchiveResult, ArchiveStep } from '../capabilities.ts';

export type { ArchiveOptions, ArchiveResult, ArchiveStep };

type PlannedActor = Omit<ActorDbRow, 'archived_to' | 'archived_at'>;

/** Moves the events of actors that ended before `options.before` into an archive file (see the top of this file). */
export function archiveEnded(store: SqliteEventStore, options: ArchiveOptions): ArchiveResult {
  const db = store.connection;
  const now = options.now ?? (() => new Date().toISOString());
  // This store runs the whole archive synchronously: a step's returned promise is not waited for.
  const step = (s: ArchiveStep): void => void options.onStep?.(s);
  const sizeBefore = logBytes(store.file);
  const planned = db
    .prepare(
      `SELECT id, kind, stream, state, status, version, created_at, updated_at, summary FROM actors
       WHERE status = 'terminal' AND updated_at < ? AND version > 0 AND stream NOT IN (SELECT stream FROM tombstones)
       ORDER BY created_at, id`,
    )
    .all(options.before) as PlannedActor[];
  step('planned');
  const empty: ArchiveResult = {
    file: null,
    actors: 0,
    events: 0,
    bytes: 0,
    sha256: null,
    lastSeq: null,
    lastHash: null,
    sizeBefore,
    sizeAfter: sizeBefore,
    vacuum: 'none',
  };
  if (planned.length === 0) return empty;

  const streams = new Set(planned.map((a) => a.stream));
  const head = (db.prepare('SELECT seq, hash FROM chain_head WHERE id = 1').get() as
    { seq: number; hash: Buffer } | undefined) ?? { seq: 0, hash: GENESIS };
  const copier = new ActorEventCopier(db);

  const ledger = new ArchiveLedger(store.file, streams, head.seq);

  const out = ArchiveFileWriter.create(options.out);
  try {
    const createdAt = now();
    out.header({ createdAt, before: options.before, log: store.file, actors: planned.length });
    for (const a of planned) {
      out.history(a, createdAt);
      ledger.beginActor(a.stream);
      copier.copy(out, ledger, a.stream);
      ledger.endActor(a.version);
    }
    const { events, lastSeq, lastHash } = ledger;
    out.trailer({ actors: planned.length, events, lastSeq, lastHash, chainHead: head });
    out.complete();
    step('file-written');
    out.link();
    step('file-linked');

    // The file will shrink on purpose: the last clean shutdown's size no longer bounds it (its last seq still does).
    const record = readShutdownRecord(store.file);
    if (record) writeShutdownRecord(store.file, { size: 0, lastSeq: record.lastSeq, hash: record.hash, at: record.at });

    const bytes = out.bytes;
    const sha256 = out.sha256();
    removeArchived(
      store,
      planned,
      ledger,
      { file: options.out, createdAt, before: options.before, bytes, sha256 },
      step,
    );
    step('committed');

    // Space back: incremental on a log made with it; an older log is switched over by one full VACUUM.
    const mode = db.pragma('auto_vacuum', { simple: true }) as number;
    let vacuum: ArchiveResult['vacuum'];
    if (mode === 2) {
      db.pragma('incremental_vacuum');
      vacuum = 'incremental';
    } else {
      db.pragma('auto_vacuum = INCREMENTAL');
      db.exec('VACUUM');
      vacuum = 'full';
    }
    store.checkpoint('TRUNCATE');
    step('vacuumed');
    return {
      file: options.out,
      actors: planned.length,
      events,
      bytes,
      sha256,
      lastSeq,
      lastHash: lastHash.toString('hex'),
      sizeBefore,
      sizeAfter: logBytes(store.file),
      vacuum,
    };
  } catch (err) {
    if (!out.linked) out.discard();
    else if (!archivedIn(db, options.out)) out.removeCopy();
    throw err;
  }
}

/**
 * Step (2) at the top of this file: one write transaction checks that no planned actor moved since the plan
 * (ARCHIVE_CONFLICT: nothing removed), records the archive, leaves a tombstone per actor, deletes its events and
 * snapshots, and records the chain's holes the run leaves.
 */
function removeArchived(
  store: SqliteEventStore,
  planned: readonly PlannedActor[],
  ledger: ArchiveLedger,
  archive: { file: string; createdAt: string; before: string; bytes: number; sha256: string },
  step: (s: ArchiveStep) => void,
): void {
  const db = store.connection;
  const { events, lastSeq, lastHash } = ledger;
  store.writeTransaction('archive', () => {
    const version = db.prepare(
      'SELECT coalesce(max(version), 0) AS v FROM events WHERE stream = ?',
    ) as Database.Statement<[string], { v: number }>;
    for (const a of planned) {
      const v = version.get(a.stream)!.v;
      if (v !== a.version)
        throw new RunlogError(
          'ARCHIVE_CONFLICT',
          `${a.stream} changed while it was archived (v${a.version} → v${v}); nothing was removed`,
          { stream: a.stream },
        );
    }
    const id = db
      .prepare(
        'INSERT INTO archives (file, created_at, before, actors, events, bytes, sha256, last_seq, last_hash) ' +
          'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      )
      .run(
        archive.file,
        archive.createdAt,
        archive.before,
        planned.length,
        events,
        archive.bytes,
        archive.sha256,
        lastSeq,
        lastHash,
      ).lastInsertRowid;
    const tomb = db.prepare(
      'INSERT INTO tombstones (stream, id, kind, state, status, version, created_at, updated_at, summary, archive, first_seq, last_seq) ' +
        'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    const delEvents = db.prepare('DELETE FROM events WHERE stream = ?');
    const delSnapshot = db.prepare('DELETE FROM snapshots WHERE stream = ?');
    const delOlderSnapshots = db.prepare('DELETE FROM snapshot_history WHERE stream = ?');
    const unmark = db.prepare('UPDATE actors SET snapshot_version = NULL WHERE stream = ?');
    for (const a of planned) {
      const r = ledger.ranges.get(a.stream)!;
      tomb.run(
        a.stream,
        a.id,
        a.kind,
        a.state,
        a.status,
        a.version,
        a.created_at,
        a.updated_at,
        a.summary,
        id,
        r.first,
        r.last,
      );
      delEvents.run(a.stream);
      delSnapshot.run(a.stream);
      delOlderSnapshots.run(a.stream);
      unmark.run(a.stream);
    }
    const holes = ledger.holes();
    const delGap = db.prepare('DELETE FROM chain_gaps WHERE seq = ?');
    for (const g of holes.swallowed) delGap.run(g);
    // Each hole runs from just after the last event still in the log before its end.
    const lastBefore = db.prepare('SELECT coalesce(max(seq), 0) AS s FROM events WHERE seq < ?') as Database.Statement<
      [number],
      { s: number }
    >;
    const putGap = db.prepare('INSERT OR REPLACE INTO chain_gaps (seq, from_seq, hash) VALUES (?, ?, ?)');
    for (const [end, hash] of holes.ends) putGap.run(end, lastBefore.get(end)!.s + 1, hash);
    step('removing'); // everything removed, not yet committed
  });
}

function archivedIn(db: Database.Database, file: string): boolean {
  try {
    return db.prepare('SELECT 1 FROM archives WHERE file = ?').get(file) !== undefined;
  } catch {
    return true; // cannot tell: keep the file
  }
}
