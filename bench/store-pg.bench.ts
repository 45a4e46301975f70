// PostgreSQL event-store benchmarks against the real server (`npm run setup`): durable append (one event per
// transaction, and a multi-stream batch) beside a raw node-postgres INSERT of the same rows with the same
// durability (synchronous_commit on, same table shape), and replay beside a raw SELECT. Each round works in a
// schema of its own, dropped afterwards.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { foldEvent, machines, type AnySnapshot } from '../src/machines/runtime.ts';
import { PgEventStore } from '../src/store/postgres/event-store.ts';
import { median, nowMs, round, sideBySide, sizes, type Bench } from './harness.ts';
import { benchPgUrl } from './pg-bench-fixture.ts';
import { at, data, REPLAY_STREAMS, replayHistory } from './store-fixtures.ts';

const NEEDS = 'PostgreSQL on 127.0.0.1:5432 (RUNLOG_PG_URL)';

/** A store in a fresh schema, a raw client on the same schema with the same durability, and a table like `events`. */
async function pair(): Promise<{ store: PgEventStore; raw: pg.Client; done: () => Promise<void> }> {
  const schema = `rlbench_${process.pid}_${randomBytes(4).toString('hex')}`;
  const store = await PgEventStore.open({ url: benchPgUrl(), schema });
  const raw = new pg.Client({
    connectionString: benchPgUrl(),
    options: `-c search_path=${schema} -c synchronous_commit=on`,
  });
  await raw.connect();
  // The raw row is the event without its chain link (as on SQLite, the baseline is the plain INSERT).
  await raw.query('CREATE TABLE raw_events (LIKE events INCLUDING ALL); ALTER TABLE raw_events DROP COLUMN hash');
  return {
    store,
    raw,
    done: async () => {
      await store.close();
      await raw.query(`DROP SCHEMA ${schema} CASCADE`);
      await raw.end();
    },
  };
}

const RAW_INSERT =
  'INSERT INTO raw_events (seq, stream, version, type, schema, data, meta, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)';

export const storePgBenches: Bench[] = [
  {
    name: 'store.pg.append',
    needs: NEEDS,
    async run(opts) {
      const { rounds } = opts;
      // Per round: a warm-up, then N appends each side, alternating one by one, so both see the same server and
      // disk conditions (the machine is shared: fsync latency and CPU drift from one second to the next).
      const { N, WARM } = sizes(opts, { full: { N: 300, WARM: 10 }, smoke: { N: 20, WARM: 2 } });
      const ours: number[] = [];
      const raw: number[] = [];
      for (let r = 0; r < rounds; r++) {
        const p = await pair();
        try {
          let v = 0;
          const oursOne = () =>
            p.store
              .appendToStream('instance-bench', [{ type: 'instance.spawned', data, at }], {
                expectedVersion: v === 0 ? 'no-stream' : v,
              })
              .then(() => (v += 1));
          let rv = 0;
          const rawOne = () =>
            p.raw.query(RAW_INSERT, [
              (rv += 1),
              'instance-bench',
              rv,
              'instance.spawned',
              1,
              JSON.stringify(data),
              '{}',
              at,
            ]);
          for (let i = 0; i < WARM; i++) await oursOne();
          for (let i = 0; i < WARM; i++) await rawOne();
          let oursMs = 0;
          let rawMs = 0;
          for (let i = 0; i < N; i++) {
            let t0 = nowMs();
            await oursOne();
            oursMs += nowMs() - t0;
            t0 = nowMs();
            await rawOne();
            rawMs += nowMs() - t0;
          }
          ours.push((N / oursMs) * 1000);
          raw.push((N / rawMs) * 1000);
        } finally {
          await p.done();
        }
      }
      const v = median(ours);
      const b = median(raw);
      // The gap is a fixed time (what the append does beyond the INSERT); the ratio also moves with the fsync both
      // sides wait for, so each run says both.
      const us = (rate: number) => 1e6 / rate;
      const gapUs = median(ours.map((o, i) => us(o) - us(raw[i]!)));
      return sideBySide('store.pg.append', 'events/s', v, b, {
        target: '≥ 0.7×',
        appendUs: round(us(v)),
        rawInsertUs: round(us(b)),
        gapUs: round(gapUs),
      });
    },
  },
  {
    name: 'store.pg.append-batch',
    needs: NEEDS,
    async run(opts) {
      const { rounds } = opts;
      // 100 transactions, each 10 streams × 10 events (a group commit of the actor host), beside one multi-row
      // INSERT (unnest) of the same 100 rows per transaction (the fastest raw way to write them).
      const { BATCHES } = sizes(opts, { full: { BATCHES: 100 }, smoke: { BATCHES: 5 } });
      const STREAMS = 10;
      const SIZE = 10;
      const ours: number[] = [];
      const raw: number[] = [];
      const events = Array.from({ length: SIZE }, () => ({ type: 'instance.spawned', data, at }));
      for (let r = 0; r < rounds; r++) {
        const p = await pair();
        try {
          let t0 = nowMs();
          for (let b = 0; b < BATCHES; b++) {
            await p.store.appendMany(
              Array.from({ length: STREAMS }, (_, s) => ({
                stream: `instance-${s}`,
                events,
                expectedVersion: b === 0 ? ('no-stream' as const) : b * SIZE,
              })),
            );
          }
          ours.push(((BATCHES * STREAMS * SIZE) / (nowMs() - t0)) * 1000);
          t0 = nowMs();
          for (let b = 0; b < BATCHES; b++) {
            // The same rows as ours, each with its own values (data, meta and time sent per row, as ours sends them).
            const n = STREAMS * SIZE;
            const seqs = Array.from({ length: n }, (_, i) => b * n + i + 1);
            const streams = Array.from({ length: n }, (_, i) => `instance-${Math.floor(i / SIZE)}`);
            const versions = Array.from({ length: n }, (_, i) => b * SIZE + (i % SIZE) + 1);
            const types = Array.from({ length: n }, () => 'instance.spawned');
            const datas = Array.from({ length: n }, () => JSON.stringify(data));
            const metas = Array.from({ length: n }, () => '{}');
            const ats = Array.from({ length: n }, () => at);
            await p.raw.query(
              `INSERT INTO raw_events (seq, stream, version, type, schema, data, meta, at)
               SELECT s, st, v, t, 1, d::jsonb, m::jsonb, a
               FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::text[], $5::text[], $6::text[], $7::text[])
                 AS u(s, st, v, t, d, m, a)`,
              [seqs, streams, versions, types, datas, metas, ats],
            );
          }
          raw.push(((BATCHES * STREAMS * SIZE) / (nowMs() - t0)) * 1000);
        } finally {
          await p.done();
        }
      }
      const v = median(ours);
      const b = median(raw);
      return sideBySide('store.pg.append-batch', 'events/s', v, b);
    },
  },
  {
    name: 'store.pg.replay',
    needs: NEEDS,
    async run(opts) {
      const { rounds, log } = opts;
      // The same log as store.replay (store-fixtures.ts).
      const STREAMS = sizes(opts, REPLAY_STREAMS);
      const history = replayHistory;
      const p = await pair();
      try {
        for (let s = 0; s < STREAMS; s += 200) {
          await p.store.appendMany(
            Array.from({ length: Math.min(200, STREAMS - s) }, (_, k) => ({
              stream: `instance-${s + k}`,
              events: history,
              expectedVersion: 'no-stream' as const,
            })),
          );
        }
        await p.raw.query('ANALYZE events');
        const total = STREAMS * history.length;
        log(`store.pg.replay: ${total} events in ${STREAMS} streams`);
        const ours: number[] = [];
        const raw: number[] = [];
        for (let r = 0; r < rounds; r++) {
          // Read the whole log in global order (pages, parse, upcast) and fold each event into its stream's snapshot.
          let t0 = nowMs();
          const snaps = new Map<string, AnySnapshot>();
          let folded = 0;
          for await (const e of p.store.readAll()) {
            snaps.set(e.stream, foldEvent(machines.instance, snaps.get(e.stream), e));
            folded += 1;
          }
          if (snaps.size !== STREAMS) throw new Error(`folded ${snaps.size} streams, expected ${STREAMS}`);
          ours.push((folded / (nowMs() - t0)) * 1000);
          t0 = nowMs();
          const rows = (await p.raw.query('SELECT * FROM events ORDER BY seq')).rows.length;
          raw.push((rows / (nowMs() - t0)) * 1000);
        }
        const v = median(ours);
        const b = median(raw);
        return sideBySide('store.pg.replay', 'events/s', v, b);
      } finally {
        await p.done();
      }
    },
  },
];
