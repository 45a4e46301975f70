// The hash chain of a PostgreSQL log, checked a page at a time in one snapshot: each event against the link before
// it (recomputed from its stored columns with the same function as SQLite's), then the last one against chain_head.
import { GENESIS, eventHash, type ChainCheck, type ChainedEventFields } from '../chain.ts';
import type pg from 'pg';

const PAGE = 10_000;

/** A row as the chain check reads it: data and meta as the server's text of the stored jsonb (what the link hashed). */
export interface ChainRow extends ChainedEventFields {
  data: string;
  meta: string;
  hash: Buffer | null;
}

export async function checkChain(
  query: <R extends pg.QueryResultRow>(sql: string, params: unknown[]) => Promise<R[]>,
  afterSeq: number,
): Promise<ChainCheck> {
  let prev: Buffer = GENESIS;
  let cursor = Math.max(0, afterSeq);
  if (cursor > 0) {
    const [before] = await query<{ seq: number; hash: Buffer }>(
      'SELECT seq, hash FROM events WHERE seq <= $1 ORDER BY seq DESC LIMIT 1',
      [cursor],
    );
    if (before) {
      prev = before.hash;
      cursor = before.seq;
    } else cursor = 0;
  }
  const gaps = new Map(
    (
      await query<{ seq: number; from_seq: number; hash: Buffer }>(
        'SELECT seq, from_seq, hash FROM chain_gaps WHERE seq >= $1',
        [cursor],
      )
    ).map((g) => [g.seq, g]),
  );
  // A recorded hole must cover all of what is missing (from_seq..seq): events deleted around it are still damage.
  const gap = (end: number, from: number): Buffer | undefined => {
    const g = gaps.get(end);
    return g && g.from_seq <= from ? g.hash : undefined;
  };
  let events = 0;
  let lastSeq = cursor;
  for (;;) {
    const rows = await query<ChainRow>(
      'SELECT seq, stream, version, type, schema, at, data::text AS data, meta::text AS meta, hash ' +
        `FROM events WHERE seq > $1 ORDER BY seq LIMIT ${PAGE}`,
      [lastSeq],
    );
    for (const r of rows) {
      if (r.seq !== lastSeq + 1) {
        const link = gap(r.seq - 1, lastSeq + 1);
        // The first missing position is named (as before retention existed), not the event after the hole.
        if (!link)
          return {
            ok: false,
            events,
            seq: lastSeq + 1,
            stream: null,
            version: null,
            reason: `events ${lastSeq + 1}..${r.seq - 1} are missing (and no archive recorded them)`,
          };
        prev = link;
      }
      const want = eventHash(prev, r.seq, r.stream, r.version, r.type, r.schema, r.at, r.data, r.meta);
      if (!r.hash || !want.equals(r.hash)) {
        return {
          ok: false,
          events,
          seq: r.seq,
          stream: r.stream,
          version: r.version,
          reason: r.hash ? 'its bytes do not match its hash (changed after it was written)' : 'the event has no hash',
        };
      }
      prev = r.hash;
      lastSeq = r.seq;
      events += 1;
    }
    if (rows.length < PAGE) break;
  }
  const [head] = await query<{ seq: number; hash: Buffer }>('SELECT seq, hash FROM chain_head WHERE id = 1', []);
  const headSeq = head?.seq ?? 0;
  const archivedTail = headSeq > lastSeq ? gap(headSeq, lastSeq + 1) : undefined;
  if (archivedTail) {
    // The log's last events were archived: the head names the last archived link.
    if (!archivedTail.equals(head!.hash))
      return {
        ok: false,
        events,
        seq: headSeq,
        stream: null,
        version: null,
        reason: `the chain's head (seq ${headSeq}) does not match the archived link recorded for it`,
      };
    return { ok: true, events, lastSeq: headSeq, lastHash: head!.hash };
  }
  if (headSeq > lastSeq) {
    return {
      ok: false,
      events,
      seq: lastSeq + 1,
      stream: null,
      version: null,
      reason: `the chain's head is at seq ${headSeq} but the log ends at seq ${lastSeq} (events are missing from its end)`,
    };
  }
  if (headSeq < lastSeq || !(head?.hash ?? GENESIS).equals(prev)) {
    return {
      ok: false,
      events,
      seq: lastSeq,
      stream: null,
      version: null,
      reason: `the chain's head (seq ${headSeq}) does not name the last event (seq ${lastSeq})`,
    };
  }
  return { ok: true, events, lastSeq, lastHash: prev };
}
