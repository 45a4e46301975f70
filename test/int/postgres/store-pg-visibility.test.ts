// The sequence/visibility trap of PostgreSQL event stores, on purpose: a transaction holding a lower position
// commits after a higher one. With a plain bigserial a reader following the position skips the late event for
// good (shown first, so this test can tell the difference); the runlog store must never let that happen.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';

let url = '';
beforeAll(async () => {
  url = await requirePostgres();
});
afterAll(async () => {
  if (url) await dropSchemas(url);
});

async function connect(schema: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
  await c.connect();
  return c;
}

/**
 * Waits until another session's append is blocked on a lock (read from pg_stat_activity: no clock involved).
 * Whatever the mechanism, B is then as far as it can get while A is open.
 */
async function waitForBlockedAppend(observer: pg.Client, settled: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !settled(); i++) {
    const { rows } = await observer.query<{ n: number }>(
      'SELECT count(*)::integer AS n FROM pg_stat_activity ' +
        "WHERE wait_event_type = 'Lock' AND query LIKE '%append_event%' AND pid <> pg_backend_pid()",
    );
    if (rows[0]!.n >= 1) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  if (!settled()) throw new Error('the second append neither finished nor waited on a lock');
}

/**
 * The store's own append functions, called in a transaction the test keeps open: append_events (a batch) and
 * append_event (one event to one stream, migration 7). They take one lock, so each holds back the other.
 */
const appendOne = (c: pg.Client, stream: string, type: string) =>
  c.query<{ o_first: number }>('SELECT o_first FROM append_events($1, $2, $3, $4, $5, $6, $7, $8)', [
    [stream],
    ['any'],
    [1],
    [type],
    [1],
    ['{}'],
    ['{}'],
    ['2026-12-01T00:00:00.000Z'],
  ]);
const appendSingle = (c: pg.Client, stream: string, type: string) =>
  c.query<{ o_first: number }>('SELECT o_first FROM append_event($1, $2, $3, $4, $5, $6, $7)', [
    stream,
    'any',
    type,
    1,
    '{}',
    '{}',
    '2026-12-01T00:00:00.000Z',
  ]);

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

describe('PostgreSQL global order: no event is skipped when commits come out of order', () => {
  it('control: with a bare bigserial, a reader following the position misses the late commit', async () => {
    const schema = testSchema('naive');
    const setup = await connect('public');
    await setup.query(
      `CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.naive (pos bigserial PRIMARY KEY, what text NOT NULL)`,
    );
    await setup.end();
    const [a, b, reader] = [await connect(schema), await connect(schema), await connect(schema)];
    try {
      await a.query('BEGIN');
      const low = (
        await a.query<{ pos: string }>("INSERT INTO naive (what) VALUES ('early, commits late') RETURNING pos")
      ).rows[0]!.pos;
      const high = (
        await b.query<{ pos: string }>("INSERT INTO naive (what) VALUES ('late, commits first') RETURNING pos")
      ).rows[0]!.pos;
      expect(Number(low)).toBeLessThan(Number(high));
      const seen: number[] = [];
      const follow = async () => {
        const rows = (
          await reader.query<{ pos: string }>('SELECT pos FROM naive WHERE pos > $1 ORDER BY pos', [seen.at(-1) ?? 0])
        ).rows;
        seen.push(...rows.map((r) => Number(r.pos)));
      };
      await follow(); // sees the higher position only
      await a.query('COMMIT');
      await follow(); // the lower one is now committed, but below the reader's cursor
      expect(seen).toEqual([Number(high)]);
      expect((await reader.query('SELECT count(*)::integer AS n FROM naive')).rows[0].n).toBe(2);
    } finally {
      await Promise.all([a.end(), b.end(), reader.end()]);
    }
  });

  it('runlog: the higher append waits for the lower one to commit, and a follower sees both, in order, once', async () => {
    const schema = testSchema('order');
    const writer = await PgEventStore.open({ url, schema });
    const follower = await PgEventStore.open({ url, schema });
    const [a, observer] = [await connect(schema), await connect(schema)];
    const seen: RecordedEvent[] = [];
    const sub = follower.subscribe({ from: 1, pollMs: 10 }, (e) => void seen.push(e));
    try {
      // A takes position 1 in a transaction it keeps open.
      await a.query('BEGIN');
      expect(Number((await appendOne(a, 'stream-a', 'early.commits-late')).rows[0]!.o_first)).toBe(1);
      // B appends from another connection (another store handle). It must not get ahead of A.
      let bDone = false;
      const b = writer
        .appendToStream('stream-b', [{ type: 'late.wants-first', data: {} }], { expectedVersion: 'no-stream' })
        .finally(() => (bDone = true));
      await waitForBlockedAppend(observer, () => bDone);
      // While A is open: B has not committed, and a follower (subscription and plain reads) has seen nothing.
      expect(bDone).toBe(false);
      const midway: number[] = [];
      for await (const e of follower.readAll()) midway.push(e.seq);
      expect(midway).toEqual([]);
      expect(await follower.lastSeq()).toBe(0);
      // A commits last-but-lower; then B goes through behind it.
      await a.query('COMMIT');
      const rb = await b;
      expect(rb.lastSeq).toBe(2);
      await until(() => seen.length >= 2, 'both events at the follower');
      await new Promise((r) => setTimeout(r, 50)); // a few more polls: nothing arrives twice
      expect(seen.map((e) => [e.seq, e.stream, e.type])).toEqual([
        [1, 'stream-a', 'early.commits-late'],
        [2, 'stream-b', 'late.wants-first'],
      ]);
    } finally {
      await sub.close();
      await Promise.all([a.end(), observer.end()]);
      await writer.close();
      await follower.close();
    }
  });

  it('runlog: a lower append that rolls back leaves no hole; the waiting append takes its position', async () => {
    const schema = testSchema('rollback');
    const writer = await PgEventStore.open({ url, schema });
    const [a, observer] = [await connect(schema), await connect(schema)];
    try {
      // A holds position 1 through the one-event function; B is a batch of two (append_events) behind it.
      await a.query('BEGIN');
      expect(Number((await appendSingle(a, 'stream-a', 'doomed')).rows[0]!.o_first)).toBe(1);
      let bDone = false;
      const b = writer
        .appendToStream(
          'stream-b',
          [
            { type: 'kept', data: {} },
            { type: 'kept.too', data: {} },
          ],
          { expectedVersion: 'no-stream' },
        )
        .finally(() => (bDone = true));
      await waitForBlockedAppend(observer, () => bDone);
      expect(bDone).toBe(false);
      await a.query('ROLLBACK');
      expect((await b).lastSeq).toBe(2);
      const all: [number, string][] = [];
      for await (const e of writer.readAll()) all.push([e.seq, e.type]);
      expect(all).toEqual([
        [1, 'kept'],
        [2, 'kept.too'],
      ]);
    } finally {
      await Promise.all([a.end(), observer.end()]);
      await writer.close();
    }
  });

  it('runlog: three handles appending at once; a follower on a fourth sees positions 1..N, each once, none skipped', async () => {
    const schema = testSchema('burst');
    const writers = await Promise.all([1, 2, 3].map(() => PgEventStore.open({ url, schema, maxConnections: 4 })));
    const follower = await PgEventStore.open({ url, schema });
    const seen: number[] = [];
    const sub = follower.subscribe({ from: 1, pollMs: 5 }, (e) => void seen.push(e.seq));
    try {
      await Promise.all(
        writers.flatMap((w, wi) =>
          Array.from({ length: 40 }, (_, i) =>
            i % 4 === 0
              ? w.appendMany([
                  { stream: `w${wi}-s${i}`, events: [{ type: 'x', data: { i } }], expectedVersion: 'no-stream' },
                  {
                    stream: `w${wi}-t${i}`,
                    events: [
                      { type: 'y', data: { i } },
                      { type: 'z', data: { i } },
                    ],
                    expectedVersion: 'no-stream',
                  },
                ])
              : w.appendToStream(`w${wi}-s${i}`, [{ type: 'x', data: { i } }], { expectedVersion: 'no-stream' }),
          ),
        ),
      );
      const total = await follower.lastSeq();
      expect(total).toBe(3 * (30 * 1 + 10 * 3));
      await until(() => seen.length >= total, `${total} events at the follower`);
      expect(seen).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    } finally {
      await sub.close();
      await Promise.all(writers.map((w) => w.close()));
      await follower.close();
    }
  });
});
