// `runlog verify --store postgres://… [--archives <dir>]`: the archives a PostgreSQL log's retention wrote
// (postgres/archive.ts), checked as SQLite's are (../archive-check.ts: recorded SHA-256, the archive's own chain and
// trailer, its tombstones, the holes it left in chain_gaps). The file check is synchronous and asks the log for
// the link before each event whose predecessor stayed in the log, so those links are read first, in one query.
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import {
  ArchiveCheckRun,
  checkOne,
  type ArchiveFinding,
  type ArchiveRow,
  type TombstoneRow,
} from '../archive/archive-check.ts';
import type { PgEventStore } from './event-store.ts';

/** The seqs just before the events an archive says start a run (their `prev`): the log's links to check them against. */
function linksAsked(file: string): number[] {
  try {
    const seqs: number[] = [];
    for (const line of gunzipSync(readFileSync(file)).toString('utf8').split('\n')) {
      if (!line.includes('"prev":')) continue;
      const m = /^\{"seq":(\d+),/.exec(line);
      if (m) seqs.push(Number(m[1]) - 1);
    }
    return seqs;
  } catch {
    return []; // unreadable: checkOne says how
  }
}

/** Checks every archive the log recorded; returns what is wrong (empty: every archive found is sound). */
export async function checkPgArchives(
  store: PgEventStore,
  options: { dirs?: readonly string[] } = {},
): Promise<{ checked: number; findings: ArchiveFinding[] }> {
  const archives = await store.sql<ArchiveRow>(
    'SELECT id, file, actors, events::integer AS events, bytes::integer AS bytes, sha256, last_seq, last_hash FROM archives ORDER BY id',
    [],
  );
  const gaps = new Map(
    (await store.sql<{ seq: number; hash: Buffer }>('SELECT seq, hash FROM chain_gaps', [])).map((g) => [
      g.seq,
      g.hash.toString('hex'),
    ]),
  );
  const run = new ArchiveCheckRun(options.dirs ?? []);
  for (const a of archives) {
    const where = run.locate(a);
    if (!where) continue;
    const tombs = await store.sql<TombstoneRow>(
      'SELECT stream, version, first_seq, last_seq FROM tombstones WHERE archive = $1',
      [a.id],
    );
    const asked = linksAsked(where);
    const inLog = new Map(
      (
        await store.sql<{ seq: number; hash: Buffer }>('SELECT seq, hash FROM events WHERE seq = ANY($1::bigint[])', [
          asked,
        ])
      ).map((r) => [r.seq, r.hash.toString('hex')]),
    );
    run.record(
      where,
      checkOne(where, a, tombs, gaps, (seq) => inLog.get(seq) ?? gaps.get(seq)),
    );
  }
  return run.result();
}
