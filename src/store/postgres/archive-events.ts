// One archived actor's events, copied from a PostgreSQL log into the archive file (postgres/archive.ts): read a page
// at a time in version order with the data and meta as the stored jsonb's text (what their chain links hashed), each
// checked against its neighbours and the recorded holes around it (../archive/archive-ledger.ts), then written with
// its link. Kept apart from the run because this is the file's content, event by event; the run around it plans,
// locks, removes and vacuums.
import type pg from 'pg';
import { eventHash } from '../chain.ts';
import type { ArchiveFileWriter } from '../archive/archive-file.ts';
import type { ArchiveLedger } from '../archive/archive-ledger.ts';
import type { ChainRow } from './chain-check.ts';

const PAGE = 1024;

/** One statement on the archiver's connection: its rows. */
export type ArchiveQuery = <R extends pg.QueryResultRow>(sql: string, params?: unknown[]) => Promise<R[]>;

/** Writes every event of `stream` into the archive, a page at a time, as the ledger links them. */
export async function copyActorEvents(
  q: ArchiveQuery,
  out: ArchiveFileWriter,
  ledger: ArchiveLedger,
  stream: string,
): Promise<void> {
  for (;;) {
    // hash is NOT NULL in every log with archives (postgres/schema.ts: set before the retention tables come).
    const rows = await q<ChainRow & { hash: Buffer }>(
      'SELECT seq, stream, version, type, schema, at, data::text AS data, meta::text AS meta, hash ' +
        `FROM events WHERE stream = $1 AND version > $2 ORDER BY version LIMIT ${PAGE}`,
      [stream, ledger.version],
    );
    if (rows.length === 0) break;
    // The neighbours of this page's events, and the holes just before them, in two queries (not one a row).
    const seqs = rows.map((r) => r.seq);
    const near = new Map(
      (
        await q<{ seq: number; stream: string; hash: Buffer }>(
          'SELECT seq, stream, hash FROM events WHERE seq = ANY($1::bigint[])',
          [[...seqs.map((s) => s - 1), ...seqs.map((s) => s + 1)]],
        )
      ).map((r) => [r.seq, r]),
    );
    const gapsAt = new Map(
      (
        await q<{ seq: number; hash: Buffer }>('SELECT seq, hash FROM chain_gaps WHERE seq = ANY($1::bigint[])', [
          seqs.map((s) => s - 1),
        ])
      ).map((g) => [g.seq, g.hash]),
    );
    for (const r of rows) {
      const around = {
        before: r.seq > 1 ? near.get(r.seq - 1) : undefined,
        gapBefore: gapsAt.get(r.seq - 1),
        next: near.get(r.seq + 1),
      };
      const { prev, needsGapAfter } = ledger.event(r, around, (link) =>
        eventHash(link, r.seq, r.stream, r.version, r.type, r.schema, r.at, r.data, r.meta),
      );
      out.event({
        seq: r.seq,
        stream,
        version: r.version,
        type: r.type,
        schema: r.schema,
        at: r.at,
        data: r.data,
        meta: r.meta,
        hash: r.hash,
        ...(prev ? { prev } : {}),
      });
      if (needsGapAfter) {
        const [g] = await q<{ seq: number; from_seq: number; hash: Buffer }>(
          'SELECT seq, from_seq, hash FROM chain_gaps WHERE seq > $1 ORDER BY seq LIMIT 1',
          [r.seq],
        );
        ledger.gapAfter(r.seq, g && { seq: g.seq, from: g.from_seq, hash: g.hash });
      }
    }
    if (rows.length < PAGE) break;
  }
}
