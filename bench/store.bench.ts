// Event-store benchmarks, through the store port (SQLite's adapter): durable append (single and batched) against a
// raw better-sqlite3 insert of the same row with the same pragmas, and replay (events folded through the machine)
// against a raw scan.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ActorHost } from '../src/supervisor/host/actor-host.ts';
import { createBus } from '../src/supervisor/host/bus.ts';
import { foldLog } from '../src/inspect/inspection.ts';
import { RunlogMetrics } from '../src/supervisor/observability/metrics.ts';
import { MIGRATIONS } from '../src/store/sqlite/schema.ts';
import type { AppendObserver, Metered } from '../src/store/capabilities.ts';
import { SqlitePortStore } from '../src/store/sqlite/port-adapter.ts';
import { median, nowMs, round, sideBySide, sizes, type Bench } from './harness.ts';
import { at, data, REPLAY_STREAMS, replayHistory } from './store-fixtures.ts';

function tmp(): { dir: string; file: (n: string) => string; done: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'runlog-bench-'));
  return { dir, file: (n) => join(dir, n), done: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The raw primitive: the same table, the same pragmas, a plain INSERT of the same row. */
function rawDb(file: string): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(MIGRATIONS[0]!);
  return db;
}

/** A store with the supervisor's metrics attached (its append observer), outside a supervisor; `observer()` is what metrics gave it. */
function observedStore(file: string): {
  store: SqlitePortStore;
  metrics: RunlogMetrics;
  observer: () => AppendObserver;
} {
  const store = new SqlitePortStore(file);
  let given: AppendObserver | undefined;
  const metered: Metered = {
    sizeBytes: () => store.sizeBytes(),
    observeAppends: (o) => {
      given = o;
      store.observeAppends(o);
    },
  };
  const metrics = new RunlogMetrics({
    store,
    metered,
    host: () => ({ live: () => [], get: () => undefined }) as unknown as ActorHost,
    bus: createBus(),
    now: () => new Date().toISOString(),
    processMetrics: false,
  });
  return { store, metrics, observer: () => given! };
}

export const storeBenches: Bench[] = [
  {
    name: 'store.append',
    async run(opts) {
      const { rounds } = opts;
      const { N } = sizes(opts, { full: { N: 300 }, smoke: { N: 20 } });
      const ours: number[] = [];
      const raw: number[] = [];
      for (let r = 0; r < rounds; r++) {
        const t = tmp();
        const store = new SqlitePortStore(t.file('log.db'));
        const db = rawDb(t.file('raw.db'));
        const ins = db.prepare(
          'INSERT INTO events (stream, version, type, schema, data, meta, at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        );
        // Interleave so both see the same disk conditions.
        let t0 = nowMs();
        for (let i = 0; i < N; i++)
          await store.appendToStream('instance-bench', [{ type: 'instance.spawned', data, at }], {
            expectedVersion: i === 0 ? 'no-stream' : i,
          });
        ours.push((N / (nowMs() - t0)) * 1000);
        t0 = nowMs();
        for (let i = 0; i < N; i++)
          ins.run('instance-bench', i + 1, 'instance.spawned', 1, JSON.stringify(data), '{}', at);
        raw.push((N / (nowMs() - t0)) * 1000);
        await store.close();
        db.close();
        t.done();
      }
      const v = median(ours);
      const b = median(raw);
      return sideBySide('store.append', 'events/s', v, b);
    },
  },
  {
    name: 'store.append-batch',
    async run(opts) {
      const { rounds } = opts;
      const { BATCHES, SIZE, CHUNK } = sizes(opts, {
        full: { BATCHES: 100, SIZE: 100, CHUNK: 10 },
        smoke: { BATCHES: 5, SIZE: 20, CHUNK: 2 },
      });
      const ours: number[] = [];
      const raw: number[] = [];
      const batch = Array.from({ length: SIZE }, () => ({ type: 'instance.spawned', data, at }));
      for (let r = 0; r < rounds; r++) {
        const t = tmp();
        const store = new SqlitePortStore(t.file('log.db'));
        const db = rawDb(t.file('raw.db'));
        const ins = db.prepare(
          'INSERT INTO events (stream, version, type, schema, data, meta, at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        );
        const rawBatch = db.transaction((base: number) => {
          for (let i = 0; i < SIZE; i++)
            ins.run('instance-bench', base + i + 1, 'instance.spawned', 1, JSON.stringify(data), '{}', at);
        });
        // One untimed batch each first: both files have their WAL and their statements prepared before the clock
        // runs. Then the two sides alternate in chunks, each going first in turn, so a disk that slows down or a
        // checkpoint that falls due hits both alike rather than whichever side happens to run second.
        await store.appendToStream('instance-warm', batch, { expectedVersion: 'no-stream' });
        db.transaction(() => {
          for (let i = 0; i < SIZE; i++)
            ins.run('instance-warm', i + 1, 'instance.spawned', 1, JSON.stringify(data), '{}', at);
        })();
        let oursMs = 0;
        let rawMs = 0;
        for (let c = 0; c < BATCHES; c += CHUNK) {
          const n = Math.min(CHUNK, BATCHES - c);
          const timeOurs = async () => {
            const t0 = nowMs();
            for (let b = c; b < c + n; b++)
              await store.appendToStream('instance-bench', batch, {
                expectedVersion: b === 0 ? 'no-stream' : b * SIZE,
              });
            oursMs += nowMs() - t0;
          };
          const timeRaw = () => {
            const t0 = nowMs();
            for (let b = c; b < c + n; b++) rawBatch(b * SIZE);
            rawMs += nowMs() - t0;
          };
          if ((c / CHUNK) % 2 === 0) {
            await timeOurs();
            timeRaw();
          } else {
            timeRaw();
            await timeOurs();
          }
        }
        ours.push(((BATCHES * SIZE) / oursMs) * 1000);
        raw.push(((BATCHES * SIZE) / rawMs) * 1000);
        if ((await store.streamVersion('instance-bench')) !== BATCHES * SIZE)
          throw new Error('store.append-batch: runlog did not write every event');
        const rawRows = db.prepare("SELECT count(*) AS n FROM events WHERE stream = 'instance-bench'").get() as {
          n: number;
        };
        if (rawRows.n !== BATCHES * SIZE) throw new Error('store.append-batch: the raw side did not write every row');
        await store.close();
        db.close();
        t.done();
      }
      const v = median(ours);
      const b = median(raw);
      return sideBySide('store.append-batch', 'events/s', v, b);
    },
  },
  {
    name: 'store.replay',
    async run(opts) {
      const { rounds, log } = opts;
      // The replay log of store-fixtures.ts (10,000 instance histories of 10 events).
      const STREAMS = sizes(opts, REPLAY_STREAMS);
      const history = replayHistory;
      const t = tmp();
      const store = new SqlitePortStore(t.file('log.db'), { synchronous: 'NORMAL' });
      for (let s = 0; s < STREAMS; s++)
        await store.appendToStream(`instance-${s}`, history, { expectedVersion: 'no-stream' });
      const total = STREAMS * history.length;
      log(`store.replay: ${total} events in ${STREAMS} streams`);
      const ours: number[] = [];
      const raw: number[] = [];
      const db = new Database(t.file('log.db'), { readonly: true });
      for (let r = 0; r < rounds; r++) {
        let t0 = nowMs();
        // Read the whole log once in seq order (parse + upcast) and fold each event into its stream's snapshot.
        const { events: folded, streams } = await foldLog(store);
        if (streams.size !== STREAMS) throw new Error(`folded ${streams.size} streams, expected ${STREAMS}`);
        ours.push((folded / (nowMs() - t0)) * 1000);
        t0 = nowMs();
        let rows = 0;
        for (const row of db.prepare('SELECT * FROM events ORDER BY seq').iterate()) if (row) rows += 1;
        raw.push((rows / (nowMs() - t0)) * 1000);
      }
      db.close();
      await store.close();
      t.done();
      const v = median(ours);
      const b = median(raw);
      return sideBySide('store.replay', 'events/s', v, b, { target: '≥ 200000 events/s' });
    },
  },
  {
    // The cost of metrics on the durable append: value = with the append-latency histogram, baseline = without.
    name: 'obs.store.append',
    async run(opts) {
      const { rounds } = opts;
      // fsync-bound and the disk is shared: the two sides alternate in small chunks so load drifts hit both alike.
      const { CHUNKS, CHUNK, M } = sizes(opts, {
        full: { CHUNKS: 20, CHUNK: 20, M: 100_000 },
        smoke: { CHUNKS: 3, CHUNK: 5, M: 1000 },
      });
      const N = CHUNKS * CHUNK;
      const withObs: number[] = [];
      const without: number[] = [];
      // A second bare store measured the same way: bare ÷ bare shows how much of a ratio is the disk's noise.
      const control: number[] = [];
      const observerUs: number[] = [];
      for (let r = 0; r < rounds; r++) {
        const t = tmp();
        const { store: a, metrics, observer } = observedStore(t.file('observed.db'));
        const b = new SqlitePortStore(t.file('bare.db'));
        const c2 = new SqlitePortStore(t.file('control.db'));
        const sides = [
          { store: a, ms: 0 },
          { store: b, ms: 0 },
          { store: c2, ms: 0 },
        ];
        for (let c = 0; c < CHUNKS; c++) {
          for (let k = 0; k < 3; k++) {
            const side = sides[(r + c + k) % 3]!;
            const t0 = nowMs();
            for (let i = c * CHUNK; i < (c + 1) * CHUNK; i++)
              await side.store.appendToStream('instance-bench', [{ type: 'instance.spawned', data, at }], {
                expectedVersion: i === 0 ? 'no-stream' : i,
              });
            side.ms += nowMs() - t0;
          }
        }
        withObs.push((N / sides[0]!.ms) * 1000);
        without.push((N / sides[1]!.ms) * 1000);
        control.push((N / sides[2]!.ms) * 1000);
        if (!(await metrics.text()).includes(`runlog_store_append_duration_seconds_count ${N}`))
          throw new Error('obs.store.append: the appends were not observed');
        // What the observer itself costs per append (no disk in it): the histogram and the counter.
        const observe = observer();
        const t0 = nowMs();
        for (let i = 0; i < M; i++) observe(0.001, 1);
        observerUs.push(((nowMs() - t0) / M) * 1000);
        metrics.close();
        await a.close();
        await b.close();
        await c2.close();
        t.done();
      }
      const v = median(withObs);
      const b = median(without);
      return sideBySide('obs.store.append', 'events/s', v, b, {
        target: '≥ 0.97×',
        control_ratio: round(median(control) / b),
        observer_us_per_append: round(median(observerUs)),
        append_us: round(1e6 / b),
      });
    },
  },
];
