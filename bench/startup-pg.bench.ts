// startup.pg: a supervisor's start on PostgreSQL that does not grow with history, as `startup` on SQLite. Logs of
// 100,000 and 1,000,000 events across 10,000 and 100,000 actors (ten events each: startup.bench.ts `history`), of
// which 200 are live, their leases held by the node that starts. A start opens the store (the actors rows, the
// summary below the recent window, the window's events), rehydrates the live actors and starts the node's services
// (reconcile off: there is no Docker state to compare).
//
//   value     ms for createRunlog({ store, node }) to return, as `runlog serve --store` starts
//   baseline  the raw primitive: node-postgres reading the live actors' ids and then their events
//   ratio     value ÷ baseline; the target is startup.pg.1m ≤ 1.3 × startup.pg.100k (flat in history)
//
// A full run keeps its generated log in a schema of its own (`rlbench_startup_<events>_m<migrations>`), like the
// SQLite bench's bench/.cache/: writing a million events takes minutes. A smoke run writes a small one and drops it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { PgEventStore } from '../src/store/postgres/event-store.ts';
import { PG_LATEST_SCHEMA } from '../src/store/postgres/schema.ts';
import type { StreamAppend } from '../src/store/port.ts';
import { actorsProjection } from '../src/supervisor/host/actors-projection.ts';
import { createRunlog } from '../src/supervisor/runlog.ts';
import { median, nowMs, sideBySide, sizes, type Bench } from './harness.ts';
import { benchPgUrl, cachedSchema } from './pg-bench-fixture.ts';
import { history } from './startup.bench.ts';
import { runlogInternals } from '../src/supervisor/runlog-internals.ts';

const NODE = 'bench-startup';
const BATCH = 500;

/** Writes `events` events (ten per actor) into `schema`; every `live`-th actor still runs, its lease held by NODE. */
async function generate(
  schema: string,
  events: number,
  live: number,
  admin: pg.Client,
  log: (m: string) => void,
): Promise<void> {
  const actors = events / 10;
  const liveEvery = Math.floor(actors / live);
  const store = await PgEventStore.open({ url: benchPgUrl(), schema, projections: [actorsProjection()] });
  const t0 = nowMs();
  const leased: string[] = [];
  try {
    for (let a = 0; a < actors; a += BATCH) {
      const batch: StreamAppend[] = [];
      for (let k = a; k < Math.min(actors, a + BATCH); k++) {
        const id = `inst_${String(k).padStart(7, '0')}`;
        const running = k % liveEvery === 0;
        if (running) leased.push(`instance-${id}`);
        batch.push({ stream: `instance-${id}`, events: history(id, running, k * 10), expectedVersion: 'no-stream' });
      }
      const failed = (await store.appendMany(batch)).find((o) => !o.ok);
      if (failed && !failed.ok) throw failed.error;
      if (a % 50_000 === 0)
        log(`generating ${schema}: ${a * 10}/${events} events (${Math.round((nowMs() - t0) / 1000)} s)`);
    }
  } finally {
    await store.close();
  }
  await admin.query(
    `INSERT INTO ${schema}.leases (stream, node, token, expires_at) SELECT s, $1, 1, now() FROM unnest($2::text[]) AS s`,
    [NODE, leased],
  );
  await admin.query(`VACUUM ANALYZE ${schema}.events`);
}

/** The raw primitive: the live actors' ids, then their events, read with node-postgres. */
async function rawStart(schema: string): Promise<number> {
  const c = new pg.Client({ connectionString: benchPgUrl() });
  await c.connect();
  try {
    // The actors projection's documents are keyed by stream (actors-projection.ts).
    const live = await c.query(
      `SELECT id FROM ${schema}.projection_documents WHERE projection = 'actors' AND doc->>'status' <> 'terminal'`,
    );
    const streams = live.rows.map((r: { id: string }) => r.id);
    const events = await c.query(`SELECT * FROM ${schema}.events WHERE stream = ANY($1::text[]) ORDER BY seq`, [
      streams,
    ]);
    return events.rows.length;
  } finally {
    await c.end();
  }
}

function startupPgBench(name: string, fullEvents: number, smokeEvents: number): Bench {
  return {
    name,
    needs: 'PostgreSQL on 127.0.0.1:5432 (RUNLOG_PG_URL)',
    async run(opts) {
      const { rounds, log } = opts;
      const { events, LIVE } = sizes(opts, {
        full: { events: fullEvents, LIVE: 200 },
        smoke: { events: smokeEvents, LIVE: 20 },
      });
      const schema = opts.smoke
        ? `rlbench_startup_smoke_${process.pid}`
        : `rlbench_startup_${events}_m${PG_LATEST_SCHEMA}`;
      const admin = new pg.Client({ connectionString: benchPgUrl() });
      await admin.connect();
      const home = mkdtempSync(join(tmpdir(), 'runlog-bench-startup-pg-'));
      try {
        await cachedSchema(admin, schema, () => generate(schema, events, LIVE, admin, (m) => log(`${name}: ${m}`)));
        const store = `${benchPgUrl()}?schema=${schema}`;
        const start = () =>
          createRunlog({
            home,
            store,
            node: NODE,
            reconcile: false,
            engineWatch: false,
            watchApps: false,
            metrics: false,
            log: () => undefined,
          });
        const ours: number[] = [];
        const raw: number[] = [];
        for (let r = 0; r < rounds + 1; r++) {
          let t0 = nowMs();
          const rl = await start();
          const took = nowMs() - t0;
          const live = runlogInternals(rl).host.live().length;
          await rl.close();
          if (live !== LIVE) throw new Error(`${name}: ${live} live actors, expected ${LIVE}`);
          t0 = nowMs();
          const rows = await rawStart(schema);
          const rawTook = nowMs() - t0;
          if (rows !== LIVE * 10) throw new Error(`${name}: the raw read found ${rows} events, expected ${LIVE * 10}`);
          // The first round warms the server's caches for both sides: it is not counted.
          if (r > 0) {
            ours.push(took);
            raw.push(rawTook);
          }
        }
        const target = name === 'startup.pg.1m' ? '≤ 1.3× startup.pg.100k' : 'the reference for startup.pg.1m';
        return sideBySide(name, 'ms', median(ours), median(raw), { events, actors: events / 10, live: LIVE, target });
      } finally {
        rmSync(home, { recursive: true, force: true });
        if (opts.smoke) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
        await admin.end();
      }
    },
  };
}

export const startupPgBenches: Bench[] = [
  startupPgBench('startup.pg.100k', 100_000, 1_000),
  startupPgBench('startup.pg.1m', 1_000_000, 2_000),
];
