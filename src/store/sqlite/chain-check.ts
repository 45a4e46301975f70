// The hash chain of a SQLite log (chain.ts): computing it for events written before it existed (migration 4),
// and checking it, a page at a time, against chain_head and the gaps that retention recorded.
import { CHAIN_COLUMNS, GENESIS, rowHash, type ChainCheck, type ChainRow } from '../chain.ts';
import type { Database } from './driver.ts';

/** The chain's last link as recorded (chain_head), or genesis for an empty log. */
export function chainHead(db: Database.Database): { seq: number; hash: Buffer } {
  try {
    const r = db.prepare('SELECT seq, hash FROM chain_head WHERE id = 1').get() as
      { seq: number; hash: Buffer } | undefined;
    return r ?? { seq: 0, hash: GENESIS };
  } catch {
    return { seq: 0, hash: GENESIS }; // opened read-only before migration 4: no chain yet
  }
}

/**
 * Checks the hash chain (chain.ts): every event from `afterSeq` on (the whole log by default) against the link
 * before it, then the last event against chain_head. Stops at the first bad position. `afterSeq` trusts the hash
 * stored at that seq: a tail check (`serve` at start) is as cheap as the tail is short.
 */
export function verifyChain(db: Database.Database, options: { afterSeq?: number; pageSize?: number } = {}): ChainCheck {
  const pageSize = options.pageSize ?? 2048;
  let cursor = Math.max(0, options.afterSeq ?? 0);
  let prev: Buffer = GENESIS;
  if (cursor > 0) {
    const before = db.prepare('SELECT seq, hash FROM events WHERE seq <= ? ORDER BY seq DESC LIMIT 1').get(cursor) as
      { seq: number; hash: Buffer | null } | undefined;
    if (before) {
      if (!before.hash)
        return { ok: false, events: 0, seq: before.seq, stream: null, version: null, reason: 'the event has no hash' };
      prev = before.hash;
      cursor = before.seq;
    } else cursor = 0;
  }
  // why: raw(true) rows are arrays; better-sqlite3's types keep the object row type
  const page = db
    .prepare(`SELECT ${CHAIN_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?`)
    .raw(true) as unknown as Database.Statement<[number, number], ChainRow>;
  // Archived events (sqlite/archive.ts) leave holes in the seqs; the hash before each hole's end was recorded.
  const gapStmt = db.prepare('SELECT from_seq AS "from", hash FROM chain_gaps WHERE seq = ?') as Database.Statement<
    [number],
    { from: number; hash: Buffer }
  >;
  // A recorded hole must cover all of what is missing (from_seq..seq): events deleted around it are still damage.
  const gap = (end: number, from: number): Buffer | undefined => {
    const g = gapStmt.get(end);
    return g && g.from <= from ? g.hash : undefined;
  };
  let events = 0;
  let lastSeq = cursor;
  for (;;) {
    const rows = page.all(cursor, pageSize);
    for (const r of rows) {
      if (r[0] !== lastSeq + 1) {
        const link = gap(r[0] - 1, lastSeq + 1);
        if (!link)
          return {
            ok: false,
            events,
            seq: r[0],
            stream: r[1],
            version: r[2],
            reason: `events ${lastSeq + 1}..${r[0] - 1} before it are missing (and no archive recorded them)`,
          };
        prev = link;
      }
      const expected = rowHash(prev, r);
      if (!r[8] || !expected.equals(r[8])) {
        return {
          ok: false,
          events,
          seq: r[0],
          stream: r[1],
          version: r[2],
          reason: r[8] ? 'its bytes do not match its hash (changed after it was written)' : 'the event has no hash',
        };
      }
      prev = r[8];
      lastSeq = r[0];
      events += 1;
    }
    if (rows.length < pageSize) break;
    cursor = rows[rows.length - 1]![0];
  }
  const head = chainHead(db);
  const archivedTail = head.seq > lastSeq ? gap(head.seq, lastSeq + 1) : undefined;
  if (archivedTail) {
    // The log's last events were archived: the head names the last archived link.
    if (!archivedTail.equals(head.hash))
      return {
        ok: false,
        events,
        seq: head.seq,
        stream: null,
        version: null,
        reason: `the chain's head (seq ${head.seq}) does not match the archived link recorded for it`,
      };
    return { ok: true, events, lastSeq: head.seq, lastHash: head.hash };
  }
  if (head.seq > lastSeq) {
    return {
      ok: false,
      events,
      seq: lastSeq + 1,
      stream: null,
      version: null,
      reason: `the chain's head is at seq ${head.seq} but the log ends at seq ${lastSeq} (events are missing from its end)`,
    };
  }
  if (head.seq < lastSeq || !head.hash.equals(prev)) {
    return {
      ok: false,
      events,
      seq: lastSeq,
      stream: null,
      version: null,
      reason: `the chain's head (seq ${head.seq}) does not name the last event (seq ${lastSeq})`,
    };
  }
  return { ok: true, events, lastSeq, lastHash: prev };
}

/** Migration 4: the chain of the events already in the log, computed in the migration's transaction. */
export function computeChain(db: Database.Database): void {
  // why: raw(true) rows are arrays; better-sqlite3's types keep the object row type
  const page = db
    .prepare(`SELECT ${CHAIN_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT 2048`)
    .raw(true) as unknown as Database.Statement<[number], ChainRow>;
  const set = db.prepare('UPDATE events SET hash = ? WHERE seq = ?');
  let prev: Buffer = GENESIS;
  let cursor = 0;
  for (;;) {
    const rows = page.all(cursor);
    for (const r of rows) {
      prev = rowHash(prev, r);
      set.run(prev, r[0]);
    }
    if (rows.length < 2048) break;
    cursor = rows[rows.length - 1]![0];
  }
  if (cursor > 0 || prev !== GENESIS) {
    const last = (db.prepare('SELECT coalesce(max(seq), 0) AS s FROM events').get() as { s: number }).s;
    db.prepare('INSERT INTO chain_head (id, seq, hash) VALUES (1, ?, ?)').run(last, prev);
  }
}
