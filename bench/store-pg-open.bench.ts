// store.pg.open: how long a supervisor on PostgreSQL takes to open over a log of many ended actors. 10,000 ended
// actors (the heap bench's fixture: the golden histories renamed, 2–7 events each, every one ending in a terminal
// state with its terminal actors row), written through PgEventStore.appendMany in a schema of its own (dropped
// afterwards).
//
//   value     ms for PgHostStore.open with pageOut (the default window of 10,000 positions), as `runlog serve
//             --store` opens it, to its close (not counted)
//   baseline  the raw primitive: ms for one node-postgres SELECT of every event of the log in position order (what
//             the load read before it summarised ended actors: `SELECT seq, stream, … FROM events ORDER BY seq`),
//             rows only, nothing decoded or kept
//   ratio     value ÷ baseline (lower is better: below 1, opening reads less than the whole log)
//   notes.wholeMs  the same store opened without pageOut (holds, so reads, the whole log: a one-shot reader)
//   notes.keepRecent1000Ms  with a window of 1,000 positions
//
// RUNLOG_BENCH_OPEN_ACTORS sets the number of ended actors (default 10,000: the figures in bench/results/). A long-lived
// log's size: 200,000 (1,036,358 events) took 99 s to write and 4 minutes in all on 2 cores (peak RSS 2.7 GB), most
// of it the whole copy's opens and the raw SELECTs (a million events each); a paged open there took 3.9 s.
import { actorsProjection, ACTORS_PROJECTION } from '../src/supervisor/host/actors-projection.ts';
import { PgHostStore } from '../src/store/postgres/host-store.ts';
import { median, nowMs, round, sideBySide, sizes, type Bench } from './harness.ts';
import { withEndedLog } from './pg-bench-fixture.ts';

/** How many ended actors the log holds (RUNLOG_BENCH_OPEN_ACTORS, default 10,000). */
function actorsCount(): number {
  const n = Number(process.env.RUNLOG_BENCH_OPEN_ACTORS ?? 10_000);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(
      `store.pg.open: RUNLOG_BENCH_OPEN_ACTORS must be a positive integer, not ${process.env.RUNLOG_BENCH_OPEN_ACTORS}`,
    );
  return n;
}

export const storePgOpenBenches: Bench[] = [
  {
    name: 'store.pg.open',
    needs: 'PostgreSQL on 127.0.0.1:5432 (RUNLOG_PG_URL)',
    async run(opts) {
      const { rounds, log } = opts;
      const { actors, minRounds } = sizes(opts, {
        full: { actors: actorsCount(), minRounds: 3 },
        smoke: { actors: 300, minRounds: 1 },
      });
      return withEndedLog(
        'open',
        actors,
        (m) => log(`store.pg.open: ${m}`),
        async ({ url, admin: raw, events }) => {
          const open = (pageOut: { keepRecent?: number } | null) => () =>
            PgHostStore.open({
              url,
              pollMs: 0,
              maxConnections: 2,
              projections: [actorsProjection()],
              actorRows: { projection: ACTORS_PROJECTION },
              ...(pageOut ? { pageOut } : {}),
            });
          const timed = async (fn: () => Promise<{ close(): Promise<void> }>): Promise<number> => {
            const s = nowMs();
            const x = await fn();
            const ms = nowMs() - s;
            await x.close();
            return ms;
          };
          const paged: number[] = [];
          const small: number[] = [];
          const whole: number[] = [];
          const base: number[] = [];
          // One warm-up of each (plans, caches), then the rounds, interleaved so load on the machine hits all alike.
          await timed(open({}));
          await raw.query('SELECT seq, stream, version, type, schema, data, meta, at FROM events ORDER BY seq');
          for (let r = 0; r < Math.max(minRounds, rounds); r++) {
            paged.push(await timed(open({})));
            small.push(await timed(open({ keepRecent: 1000 })));
            whole.push(await timed(open(null)));
            const s = nowMs();
            const rows = (
              await raw.query('SELECT seq, stream, version, type, schema, data, meta, at FROM events ORDER BY seq')
            ).rows;
            base.push(nowMs() - s);
            if (rows.length !== events) throw new Error(`store.pg.open: read ${rows.length} rows, wrote ${events}`);
          }
          const v = median(paged);
          const b = median(base);
          log(
            `store.pg.open: paged ${v.toFixed(0)} ms (window 1,000: ${median(small).toFixed(0)} ms), ` +
              `whole ${median(whole).toFixed(0)} ms, raw select ${b.toFixed(0)} ms`,
          );
          return sideBySide('store.pg.open', 'ms', v, b, {
            endedActors: actors,
            events,
            wholeMs: round(median(whole)),
            keepRecent1000Ms: round(median(small)),
          });
        },
      );
    },
  },
];
