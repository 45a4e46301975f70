// The hash chain and snapshots on PostgreSQL (postgres/schema.ts migration 4), against the real server (`npm run
// setup`), a schema per test: every append links its events into one chain (also when several pools append at
// once, as several nodes do), the links are SQLite's eventHash over the stored columns, damage is named at its
// first bad position, a log from before the migration gets its chain, and snapshots are kept in the append's
// transaction.
import { describe, expect, it } from 'vitest';
import { GENESIS, eventHash } from '../../../src/store/chain.ts';
import type { SnapshotRecord } from '../../../src/store/port.ts';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { PG_LATEST_SCHEMA, PG_MIGRATIONS } from '../../../src/store/postgres/schema.ts';
import { testSchema, usePostgres } from '../../support/postgres.ts';

const db = usePostgres();

// Text that a naive canonical form would get wrong: characters beyond U+FFFF (two UTF-16 units each), control
// characters, quotes, keys jsonb reorders, numbers jsonb keeps as written.
const tricky = {
  z: 1,
  a: 'snow ☃ and 😀😀',
  q: 'say "hi"\n\t\u0001',
  n: [1.5, 1e21, -0, 10],
  nested: { b: { c: null } },
};

function snapshot(stream: string, version: number, state: string): SnapshotRecord {
  return {
    stream,
    version,
    fingerprint: 'f'.repeat(32),
    createdAt: '2026-12-01T00:00:00.000Z',
    state,
    checksum: `c-${version}`,
  };
}

describe('the hash chain on PostgreSQL', () => {
  it('links every event with SQLite’s function over the stored columns, and chain_head names the last link', async () => {
    const schema = testSchema('chain');
    const store = await PgEventStore.open({ url: db.url, schema });
    try {
      await store.appendToStream('instance-😀', [{ type: 't.ü', data: tricky, meta: { who: 'ä' } }], {
        expectedVersion: 'no-stream',
      });
      await store.appendMany([
        {
          stream: 'instance-a',
          events: [
            { type: 'x', data: { i: 1 } },
            { type: 'x', data: { s: '𝄞' } },
          ],
          expectedVersion: 'no-stream',
        },
        { stream: 'instance-b', events: [{ type: 'y', data: {} }], expectedVersion: 5 }, // a conflict: no link
        { stream: 'instance-a', events: [{ type: 'x', data: { i: 3 } }], expectedVersion: 2 },
      ]);
      const { rows } = await db.admin.query(
        `SELECT seq::integer, stream, version, type, schema, at, data::text AS data, ` +
          `meta::text AS meta, hash FROM ${schema}.events ORDER BY seq`,
      );
      expect(rows.map((r) => r.seq)).toEqual([1, 2, 3, 4]);
      let prev: Buffer = GENESIS;
      for (const r of rows) {
        prev = eventHash(prev, r.seq, r.stream, r.version, r.type, r.schema, r.at, r.data, r.meta);
        expect(r.hash.toString('hex')).toBe(prev.toString('hex'));
      }
      const head = await db.admin.query(`SELECT seq::integer, hash FROM ${schema}.chain_head`);
      expect(head.rows).toEqual([{ seq: 4, hash: prev }]);
      const check = await store.verifyChain();
      expect(check).toEqual({ ok: true, events: 4, lastSeq: 4, lastHash: prev });
    } finally {
      await store.close();
    }
  });

  it('several pools appending at once (several nodes) still make one valid chain', async () => {
    const schema = testSchema('chainrace');
    const a = await PgEventStore.open({ url: db.url, schema });
    const b = await PgEventStore.open({ url: db.url, schema });
    try {
      const appends = [a, b].flatMap((store, n) =>
        Array.from({ length: 20 }, (_, i) =>
          store.appendMany([
            {
              stream: `s-${n}-${i}`,
              events: [
                { type: 'x', data: { n, i } },
                { type: 'y', data: { n, i } },
              ],
              expectedVersion: 'no-stream',
            },
            { stream: `t-${i % 3}`, events: [{ type: 'z', data: { n, i } }], expectedVersion: 'any' },
          ]),
        ),
      );
      await Promise.all(appends);
      expect(await a.verifyChain()).toMatchObject({ ok: true, events: 120, lastSeq: 120 });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('names the first bad position: a changed event, an event cut from the middle, events cut from the end', async () => {
    const schema = testSchema('chaindamage');
    const store = await PgEventStore.open({ url: db.url, schema });
    try {
      for (let i = 0; i < 6; i++)
        await store.appendToStream('instance-d', [{ type: 'x', data: { i } }], {
          expectedVersion: i === 0 ? 'no-stream' : i,
        });
      expect(await store.verifyChain()).toMatchObject({ ok: true, events: 6 });

      await db.admin.query(`UPDATE ${schema}.events SET data = '{"i": 99}' WHERE seq = 3`);
      expect(await store.verifyChain()).toMatchObject({
        ok: false,
        seq: 3,
        stream: 'instance-d',
        version: 3,
        reason: expect.stringContaining('do not match its hash'),
      });
      await db.admin.query(`UPDATE ${schema}.events SET data = '{"i": 2}' WHERE seq = 3`);
      expect(await store.verifyChain()).toMatchObject({ ok: true });

      await db.admin.query(`DELETE FROM ${schema}.events WHERE seq = 6`);
      expect(await store.verifyChain()).toMatchObject({
        ok: false,
        seq: 6,
        reason: expect.stringContaining('missing from its end'),
      });

      await db.admin.query(`DELETE FROM ${schema}.events WHERE seq = 4`);
      expect(await store.verifyChain()).toMatchObject({
        ok: false,
        seq: 4,
        reason: expect.stringContaining('missing'),
      });
    } finally {
      await store.close();
    }
  });

  it('a log written before the chain gets it when it is migrated, and appends continue it', async () => {
    const schema = testSchema('chainmigrate');
    // The schema as the previous release left it (migrations 1–3), with events appended by its append_events.
    await db.admin.query(`CREATE SCHEMA ${schema}`);
    await db.admin.query(`SET search_path TO ${schema}`);
    try {
      await db.admin.query(
        `CREATE TABLE runlog_schema (application text NOT NULL, version integer NOT NULL); ` +
          `INSERT INTO runlog_schema VALUES ('runlog-event-log', 3)`,
      );
      for (const m of PG_MIGRATIONS.slice(0, 3)) await db.admin.query(m);
      await db.admin.query(`SELECT * FROM append_events($1, $2, $3, $4, $5, $6, $7, $8)`, [
        ['instance-old', 'instance-old2'],
        ['no-stream', 'no-stream'],
        [2, 1],
        ['a', 'b', 'c'],
        [1, 1, 1],
        [JSON.stringify(tricky), '{}', '{"k": "v"}'],
        ['{}', '{}', '{}'],
        ['2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z', '2026-01-01T00:00:02.000Z'],
      ]);
    } finally {
      await db.admin.query('RESET search_path');
    }
    const store = await PgEventStore.open({ url: db.url, schema });
    try {
      expect((await db.admin.query(`SELECT version FROM ${schema}.runlog_schema`)).rows).toEqual([
        { version: PG_LATEST_SCHEMA },
      ]);
      expect(await store.verifyChain()).toMatchObject({ ok: true, events: 3, lastSeq: 3 });
      await store.appendToStream('instance-old', [{ type: 'd', data: {} }], { expectedVersion: 2 });
      expect(await store.verifyChain()).toMatchObject({ ok: true, events: 4, lastSeq: 4 });
    } finally {
      await store.close();
    }
  });

  it(
    'a log whose chain was written by migration 4’s append function is continued, ' +
      'link for link, by the one that replaces it',
    async () => {
      const schema = testSchema('chainfn');
      // Migrations 1–5 (the append function of migration 4), events appended by it: tricky text, a conflict, one
      // stream twice in a call.
      await db.admin.query(`CREATE SCHEMA ${schema}`);
      await db.admin.query(`SET search_path TO ${schema}`);
      try {
        await db.admin.query(
          `CREATE TABLE runlog_schema (application text NOT NULL, version integer NOT NULL); ` +
            `INSERT INTO runlog_schema VALUES ('runlog-event-log', 5)`,
        );
        for (const m of PG_MIGRATIONS.slice(0, 5)) await db.admin.query(m);
        const { rows } = await db.admin.query(`SELECT o_ok FROM append_events($1, $2, $3, $4, $5, $6, $7, $8)`, [
          ['instance-old', 'instance-x', 'instance-old'],
          ['no-stream', '7', '2'],
          [2, 1, 1],
          ['a', 'b', 'c', 'd'],
          [1, 1, 1, 1],
          [JSON.stringify(tricky), '{}', '{"k": "v"}', JSON.stringify({ s: '𝄞' })],
          ['{}', '{}', '{"who": "ä"}', '{}'],
          [
            '2026-01-01T00:00:00.000Z',
            '2026-01-01T00:00:01.000Z',
            '2026-01-01T00:00:02.000Z',
            '2026-01-01T00:00:03.000Z',
          ],
        ]);
        expect(rows.map((r) => r.o_ok)).toEqual([true, false, true]);
      } finally {
        await db.admin.query('RESET search_path');
      }
      const store = await PgEventStore.open({ url: db.url, schema });
      try {
        expect((await db.admin.query(`SELECT version FROM ${schema}.runlog_schema`)).rows).toEqual([
          { version: PG_LATEST_SCHEMA },
        ]);
        await store.appendMany([
          { stream: 'instance-old', events: [{ type: 'e', data: tricky, meta: { who: 'ä' } }], expectedVersion: 3 },
          { stream: 'instance-y', events: [{ type: 'f', data: {} }], expectedVersion: 4 }, // a conflict: no link
          {
            stream: 'instance-old',
            events: [
              { type: 'g', data: { s: '𝄞' } },
              { type: 'h', data: {} },
            ],
            expectedVersion: 4,
          },
        ]);
        // One event to one stream goes through migration 7's append_event: a conflict adds no link, the next one
        // continues the chain.
        await expect(
          store.appendToStream('instance-old', [{ type: 'i', data: {} }], { expectedVersion: 5 }),
        ).rejects.toMatchObject({ code: 'CONCURRENCY' });
        await store.appendToStream('instance-old', [{ type: 'j', data: tricky, meta: { who: 'ö' } }], {
          expectedVersion: 6,
        });
        const { rows } = await db.admin.query(
          `SELECT seq::integer, stream, version, type, schema, at, data::text AS data, ` +
            `meta::text AS meta, hash FROM ${schema}.events ORDER BY seq`,
        );
        expect(rows.map((r) => [r.stream, r.version])).toEqual([
          ['instance-old', 1],
          ['instance-old', 2],
          ['instance-old', 3],
          ['instance-old', 4],
          ['instance-old', 5],
          ['instance-old', 6],
          ['instance-old', 7],
        ]);
        let prev: Buffer = GENESIS;
        for (const r of rows) {
          prev = eventHash(prev, r.seq, r.stream, r.version, r.type, r.schema, r.at, r.data, r.meta);
          expect(r.hash.toString('hex')).toBe(prev.toString('hex'));
        }
        expect((await db.admin.query(`SELECT seq::integer, hash FROM ${schema}.chain_head`)).rows).toEqual([
          { seq: 7, hash: prev },
        ]);
        expect(await store.verifyChain()).toEqual({ ok: true, events: 7, lastSeq: 7, lastHash: prev });
      } finally {
        await store.close();
      }
    },
  );
});

describe('snapshots on PostgreSQL', () => {
  it('are stored in the append’s transaction for the version the append reaches; a replaced one is kept for replay --to', async () => {
    const schema = testSchema('snap');
    const store = await PgEventStore.open({ url: db.url, schema });
    try {
      await store.appendMany(
        [
          {
            stream: 'instance-s',
            events: [
              { type: 'x', data: {} },
              { type: 'x', data: {} },
            ],
            expectedVersion: 'no-stream',
          },
        ],
        { snapshots: [snapshot('instance-s', 2, '{"v":2}')] },
      );
      // A snapshot for another version than the append reaches is a caller's bug: never stored.
      await store.appendMany([{ stream: 'instance-s', events: [{ type: 'x', data: {} }], expectedVersion: 2 }], {
        snapshots: [snapshot('instance-s', 7, '{"v":7}')],
      });
      // A refused append stores no snapshot either.
      await store.appendMany([{ stream: 'instance-s', events: [{ type: 'x', data: {} }], expectedVersion: 1 }], {
        snapshots: [snapshot('instance-s', 2, '{"bad":1}')],
      });
      expect((await store.latestSnapshots(['instance-s'])).map((r) => r.state)).toEqual(['{"v":2}']);
      await store.appendMany([{ stream: 'instance-s', events: [{ type: 'x', data: {} }], expectedVersion: 3 }], {
        snapshots: [snapshot('instance-s', 4, '{"v":4}')],
      });
      expect(await store.latestSnapshots(['instance-s', 'instance-none'])).toEqual([
        snapshot('instance-s', 4, '{"v":4}'),
      ]);
      expect(await store.snapshotAtOrBefore('instance-s', 3)).toEqual(snapshot('instance-s', 2, '{"v":2}'));
      expect(await store.snapshotAtOrBefore('instance-s', 9)).toEqual(snapshot('instance-s', 4, '{"v":4}'));
      expect(await store.snapshotAtOrBefore('instance-s', 1)).toBeUndefined();
      const all: SnapshotRecord[] = [];
      for await (const r of store.iterateSnapshots()) all.push(r);
      const older: SnapshotRecord[] = [];
      for await (const r of store.iterateSnapshots({ history: true })) older.push(r);
      expect(all.map((r) => r.version)).toEqual([4]);
      expect(older.map((r) => r.version)).toEqual([2]);
      expect(await store.verifyChain()).toMatchObject({ ok: true, events: 4 });
    } finally {
      await store.close();
    }
  });
});
