// store.pg.heap.200k: a supervisor's memory on PostgreSQL over a long history, at the scale the budget is set for:
// 200,000 ended actors (the golden histories, renamed: about 1,000,000 events, each actor with its terminal row).
//
//   value     heap held by the supervisor's store (PgHostStore with pageOut, as `runlog serve --store` opens it:
//             the newest 10,000 positions held) after open + a full collection, above the heap before it (MB);
//             the budget is 40 MB
//   baseline  the raw primitive: the same newest 10,000 events as node-postgres returns them, held in an array —
//             the least a supervisor with that window can hold (MB)
//   ratio     value ÷ baseline: near 1 when memory is the window and not the history
//
// A full run keeps its log in a schema of its own (`rlbench_heap200k_m<migrations>`), as startup.pg does: writing
// 200,000 actors takes minutes. A smoke run writes 300 and drops them.
import pg from 'pg';
import { actorsProjection, ACTORS_PROJECTION } from '../src/supervisor/host/actors-projection.ts';
import { PgHostStore } from '../src/store/postgres/host-store.ts';
import { PG_LATEST_SCHEMA } from '../src/store/postgres/schema.ts';
import { writeEndedActors } from '../test/support/pg-ended-log.ts';
import { collector, held, median, round, sideBySide, sizes, type Bench } from './harness.ts';
import { benchPgUrl, cachedSchema } from './pg-bench-fixture.ts';

const WINDOW = 10_000;

/** Writes the ended actors into the schema (once: cachedSchema keeps it between runs). */
async function writeLog(schema: string, actors: number, admin: pg.Client, log: (m: string) => void): Promise<void> {
  const t0 = Date.now();
  await writeEndedActors(`${benchPgUrl()}?schema=${schema}`, actors, { batch: 500 });
  log(`${actors} ended actors written in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  await admin.query(`VACUUM ANALYZE ${schema}.events`);
}

export const storePgHeapFleetBenches: Bench[] = [
  {
    name: 'store.pg.heap.200k',
    needs: 'PostgreSQL on 127.0.0.1:5432 (RUNLOG_PG_URL)',
    async run(opts) {
      const { rounds, log } = opts;
      const { ACTORS } = sizes(opts, { full: { ACTORS: 200_000 }, smoke: { ACTORS: 300 } });
      const schema = opts.smoke ? `rlbench_heap200k_smoke_${process.pid}` : `rlbench_heap200k_m${PG_LATEST_SCHEMA}`;
      const admin = new pg.Client({ connectionString: benchPgUrl() });
      await admin.connect();
      const gc = collector();
      try {
        await cachedSchema(admin, schema, () =>
          writeLog(schema, ACTORS, admin, (m) => log(`store.pg.heap.200k: ${m}`)),
        );
        const counted = await admin.query<{ n: number }>(`SELECT count(*)::integer AS n FROM ${schema}.events`);
        const events = counted.rows[0]!.n;
        const ours: number[] = [];
        const raw: number[] = [];
        let heldEvents = 0;
        for (let r = 0; r < Math.max(1, Math.min(rounds, 3)); r++) {
          const ourHeap = await held(
            gc,
            () =>
              PgHostStore.open({
                url: `${benchPgUrl()}?schema=${schema}`,
                pollMs: 0,
                maxConnections: 2,
                projections: [actorsProjection()],
                actorRows: { projection: ACTORS_PROJECTION },
                pageOut: { keepRecent: WINDOW },
              }),
            (s) => s.heldEvents,
            (s) => s.close(),
          );
          ours.push(ourHeap.mb);
          heldEvents = ourHeap.n;
          const rawHeap = await held(
            gc,
            async () => (await admin.query(`SELECT * FROM ${schema}.events ORDER BY seq DESC LIMIT ${WINDOW}`)).rows,
            (rows) => rows.length,
            async () => undefined,
          );
          raw.push(rawHeap.mb);
          if (rawHeap.n !== Math.min(WINDOW, events))
            throw new Error(`store.pg.heap.200k: read ${rawHeap.n} rows of the window`);
        }
        return sideBySide('store.pg.heap.200k', 'MB', median(ours), median(raw), {
          endedActors: ACTORS,
          events,
          heldEvents,
          target: '≤ 40 MB',
          rawWindowMB: round(median(raw)),
        });
      } finally {
        if (opts.smoke) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
        await admin.end();
      }
    },
  },
];
