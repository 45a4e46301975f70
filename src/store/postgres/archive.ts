// Retention on PostgreSQL: the same contract and the same archive file as SQLite's (../sqlite-archive.ts): the
// events of actors that ended before a time move into a daily gzip JSONL archive (an archive header, one history
// per actor in `runlog export`'s format, a trailer naming the chain link it ends on; each event line with its
// chain hash and, where the event before it is not in this archive, that event's hash as `prev`), then leave the
// log in one transaction that records the archive (its SHA-256), leaves a tombstone per actor and records the
// chain's holes in chain_gaps. A kill at any point leaves the log untouched or fully archived: the file is
// written, fsynced and linked complete before the transaction, and the transaction is all or nothing.
//
// A cluster shares the log, so two things differ from SQLite:
// - One archiver at a time across every node: a session advisory lock (ARCHIVE_LOCK_CLASS, per schema) held for
//   the whole run. A second archiver does not wait: it gets ArchiveBusyError (ARCHIVE_BUSY) and changes nothing
//   (`serve --retain` logs it and tries again at its next run). A killed archiver's connection closes and the
//   server lets go of the lock.
// - Other nodes keep appending while the file is written (nothing is locked then: the archived actors have ended,
//   and positions past the plan are not touched). The removal is one statement in a transaction of its own
//   (archive_remove, postgres/schema.ts migration 9) that takes the append lock (the one that orders positions): appends
//   wait for its commit, so the check that no archived stream moved, the deletion and the holes recorded are exact
//   as of one moment, and the chain head they are measured against cannot move under them. The lock is held only
//   while the server runs it: an archiver stopped anywhere (paused, swapped out) never holds up the appends.
//   Positions are never given twice (append_events starts from chain_head), so a reader following the global
//   position only ever sees positions grow; events below its position disappearing is nothing it reads again.
//
// data and meta are written as the server's text of the stored jsonb, which is what their chain link hashed
// (postgres/schema.ts migration 4): the archive checks against its own chain (../archive-check.ts).
import type pg from 'pg';
import { RunlogError } from '../../domain/errors.ts';
import { GENESIS } from '../chain.ts';
import type { ArchiveOptions, ArchiveResult, ArchiveStep } from '../capabilities.ts';
import type { ActorRow } from '../port.ts';
import { ArchiveFileWriter } from '../archive/archive-file.ts';
import { ArchiveLedger } from '../archive/archive-ledger.ts';
import { copyActorEvents, type ArchiveQuery } from './archive-events.ts';
import type { PgEventStore } from './event-store.ts';
import { ARCHIVE_LOCK_CLASS } from './schema.ts';

/** Another archive run holds the log's archive lock (on this node or another). */
export class ArchiveBusyError extends RunlogError {
  constructor(where: string) {
    super(
      'ARCHIVE_BUSY',
      `another runlog archive is running on ${where} (one at a time per log, across every node); ` +
        'nothing was changed: run it again once that one ends',
      { where },
    );
  }
}

export interface PgArchiveOptions extends Omit<ArchiveOptions, 'onStep'> {
  /** Told where the run stands; a promise it returns is awaited (a test holds the run there). */
  onStep?: (step: ArchiveStep) => void | Promise<void>;
  /** The projection whose documents are the actors' rows (default `actors`). */
  projection?: string;
  /** Told which actors' streams left the log, once the removal has committed (their rows now name the archive). */
  removed?: (streams: readonly string[]) => void;
}

async function relationBytes(client: pg.PoolClient): Promise<number> {
  const { rows } = await client.query<{ n: string }>(
    "SELECT (pg_total_relation_size('events') + pg_total_relation_size('projection_documents') + " +
      "pg_total_relation_size('snapshots') + pg_total_relation_size('snapshot_history'))::bigint AS n",
  );
  return Number(rows[0]!.n);
}

/** Moves the events of actors that ended before `options.before` into an archive file (see the top of this file). */
export async function archiveEndedPg(store: PgEventStore, options: PgArchiveOptions): Promise<ArchiveResult> {
  return store.withClient(async (client) => {
    const { rows: lock } = await client.query<{ ok: boolean }>(
      'SELECT pg_try_advisory_lock($1, hashtext(current_schema())) AS ok',
      [ARCHIVE_LOCK_CLASS],
    );
    if (!lock[0]!.ok) throw new ArchiveBusyError(store.description);
    try {
      return await archiveLocked(store, client, options);
    } finally {
      await client
        .query('SELECT pg_advisory_unlock($1, hashtext(current_schema()))', [ARCHIVE_LOCK_CLASS])
        .catch(() => undefined);
    }
  });
}

async function archiveLocked(
  store: PgEventStore,
  client: pg.PoolClient,
  options: PgArchiveOptions,
): Promise<ArchiveResult> {
  const now = options.now ?? (() => new Date().toISOString());
  // A test's hook may return a promise (it waits there while another process appends); it is awaited.
  const step = async (at: ArchiveStep): Promise<void> => {
    await options.onStep?.(at);
  };
  const q: ArchiveQuery = async <R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> =>
    (await client.query<R>(sql, params)).rows;
  const sizeBefore = await relationBytes(client);
  const planned = (
    await q<{ doc: ActorRow }>(
      `SELECT doc FROM projection_documents d
       WHERE projection = $1 AND doc->>'status' = 'terminal' AND doc->>'updatedAt' < $2 AND (doc->>'version')::integer > 0
         AND NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.stream = d.id)
       ORDER BY doc->>'createdAt' COLLATE "C", doc->>'id' COLLATE "C"`,
      [options.projection ?? 'actors', options.before],
    )
  ).map((r) => r.doc);
  await step('planned');
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

  // Read after the plan: every planned actor's events (committed before it was terminal) are at or below it.
  const [head] = await q<{ seq: number; hash: Buffer }>('SELECT seq, hash FROM chain_head WHERE id = 1');
  const headSeq = head?.seq ?? 0;
  const streams = new Set(planned.map((a) => a.stream));
  const ledger = new ArchiveLedger(store.description, streams, headSeq);

  const out = ArchiveFileWriter.create(options.out);
  let committed = false;
  try {
    const createdAt = now();
    out.header({ createdAt, before: options.before, log: store.description, actors: planned.length });
    for (const a of planned) {
      out.history(a, createdAt);
      ledger.beginActor(a.stream);
      await copyActorEvents(q, out, ledger, a.stream);
      ledger.endActor(a.version);
    }
    const { events, lastSeq, lastHash, ranges } = ledger;
    out.trailer({
      actors: planned.length,
      events,
      lastSeq,
      lastHash,
      chainHead: { seq: headSeq, hash: head?.hash ?? GENESIS },
    });
    out.complete();
    await step('file-written');
    out.link();
    await step('file-linked');

    const bytes = out.bytes;
    const sha256 = out.sha256();
    const { swallowed, ends: holeEnds } = ledger.holes();
    const payload = {
      streams: planned.map((a) => a.stream),
      versions: planned.map((a) => a.version),
      first: planned.map((a) => ranges.get(a.stream)!.first),
      last: planned.map((a) => ranges.get(a.stream)!.last),
      file: options.out,
      createdAt,
      before: options.before,
      actors: planned.length,
      events,
      bytes,
      sha256,
      lastSeq,
      lastHash: lastHash.toString('hex'),
      projection: options.projection ?? 'actors',
      swallowed: [...swallowed],
      holeEnds: [...holeEnds.keys()],
      holeHashes: [...holeEnds.values()].map((h) => h.toString('hex')),
    };
    await step('removing'); // the removal not yet sent: the log untouched
    await removeArchived(q, planned, payload);
    committed = true;
    options.removed?.(payload.streams);
    await step('committed');
    // The dead rows become space for new ones (VACUUM gives back to the OS only what ends a table's file).
    await client.query('VACUUM events, snapshots, snapshot_history, projection_documents');
    await step('vacuumed');
    return {
      file: options.out,
      actors: planned.length,
      events,
      bytes,
      sha256,
      lastSeq,
      lastHash: lastHash.toString('hex'),
      sizeBefore,
      sizeAfter: await relationBytes(client),
      vacuum: 'plain',
    };
  } catch (err) {
    if (!out.linked) out.discard();
    else if (!committed && !(await recorded(client, options.out))) out.removeCopy();
    throw err;
  }
}

/**
 * Removes the archived actors from the log and records the archive: one statement in a transaction of its own
 * (postgres/schema.ts migration 9), so appends wait only while the server runs it and commits (see the top of this
 * file). An archived stream that moved since the plan removes nothing: ARCHIVE_CONFLICT.
 */
async function removeArchived(q: ArchiveQuery, planned: readonly ActorRow[], payload: object): Promise<void> {
  const [r] = await q<{ o_archive: string | null; o_stream: string | null; o_version: number | null }>(
    'SELECT o_archive, o_stream, o_version FROM archive_remove($1::json)',
    [JSON.stringify(payload)],
  );
  if (!r || r.o_archive === null) {
    const a = planned.find((x) => x.stream === r?.o_stream);
    throw new RunlogError(
      'ARCHIVE_CONFLICT',
      `${r?.o_stream} changed while it was archived (v${a?.version} → v${r?.o_version}); nothing was removed`,
      { stream: r?.o_stream ?? null },
    );
  }
}

async function recorded(client: pg.PoolClient, file: string): Promise<boolean> {
  try {
    return (await client.query('SELECT 1 FROM archives WHERE file = $1', [file])).rows.length > 0;
  } catch {
    return true; // cannot tell: keep the file
  }
}
