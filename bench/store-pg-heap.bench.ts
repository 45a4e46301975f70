// store.pg.heap: what a supervisor on PostgreSQL holds in memory over a log of many ended actors. 10,000 ended
// actors (the golden histories, renamed: 2–7 events each, every one ending in a terminal state, with its terminal
// actors row), written fast through PgEventStore.appendMany in a schema of its own (dropped afterwards).
//
//   value     heap held by the supervisor's store (PgHostStore with pageOut, as `runlog serve --store` opens it)
//             after open + a full collection, above the heap before it opened (MB)
//   baseline  the same store holding the whole log (no pageOut: what every supervisor held before, and what a
//             one-shot reader still holds) (MB)
//   ratio     value ÷ baseline (lower is better)
//   notes.pagedKeepRecent1000MB  the same with a recent window of 1,000 positions instead of 10,000 (the rest is
//             the actors rows ps lists and each stream's stub)
//   notes.rawRowsMB  the raw primitive: the same events as node-postgres returns them (`SELECT * FROM events`),
//             held in an array — what the log itself weighs in this process's memory
import { actorsProjection, ACTORS_PROJECTION } from '../src/supervisor/host/actors-projection.ts';
import { PgHostStore } from '../src/store/postgres/host-store.ts';
import { collector, held, median, round, sideBySide, sizes, type Bench } from './harness.ts';
import { withEndedLog } from './pg-bench-fixture.ts';

export const storePgHeapBenches: Bench[] = [
  {
    name: 'store.pg.heap',
    needs: 'PostgreSQL on 127.0.0.1:5432 (RUNLOG_PG_URL)',
    async run(opts) {
      const { rounds, log } = opts;
      const { ACTORS } = sizes(opts, { full: { ACTORS: 10_000 }, smoke: { ACTORS: 300 } });
      const gc = collector();
      return withEndedLog(
        'heap',
        ACTORS,
        (m) => log(`store.pg.heap: ${m}`),
        async ({ schema, url, admin, events }) => {
          const open = (pageOut: boolean, keepRecent?: number) => () =>
            PgHostStore.open({
              url,
              pollMs: 0,
              maxConnections: 2,
              projections: [actorsProjection()],
              actorRows: { projection: ACTORS_PROJECTION },
              ...(pageOut ? { pageOut: keepRecent !== undefined ? { keepRecent } : {} } : {}),
            });
          const paged: number[] = [];
          const whole: number[] = [];
          const raw: number[] = [];
          const small: number[] = [];
          let heldPaged = 0;
          let heldWhole = 0;
          for (let r = 0; r < Math.max(1, Math.min(rounds, 3)); r++) {
            const a = await held(
              gc,
              open(true),
              (s) => s.heldEvents,
              (s) => s.close(),
            );
            paged.push(a.mb);
            heldPaged = a.n;
            // What is left with a window of 1,000 positions: mostly the actors rows (ps) and each stream's stub.
            small.push(
              (
                await held(
                  gc,
                  open(true, 1000),
                  (s) => s.heldEvents,
                  (s) => s.close(),
                )
              ).mb,
            );
            const b = await held(
              gc,
              open(false),
              (s) => s.heldEvents,
              (s) => s.close(),
            );
            whole.push(b.mb);
            heldWhole = b.n;
            const c = await held(
              gc,
              async () => (await admin.query(`SELECT * FROM ${schema}.events ORDER BY seq`)).rows,
              (rows) => rows.length,
              async () => undefined,
            );
            raw.push(c.mb);
            if (c.n !== events) throw new Error(`store.pg.heap: read ${c.n} rows, wrote ${events}`);
          }
          if (heldWhole !== events)
            throw new Error(`store.pg.heap: the whole copy holds ${heldWhole} events, the log has ${events}`);
          const v = median(paged);
          const b = median(whole);
          log(
            `store.pg.heap: paged out ${v.toFixed(1)} MB (${heldPaged} events held), ` +
              `whole log ${b.toFixed(1)} MB (${heldWhole}), raw rows ${median(raw).toFixed(1)} MB`,
          );
          return sideBySide('store.pg.heap', 'MB', v, b, {
            endedActors: ACTORS,
            events,
            heldEventsPaged: heldPaged,
            heldEventsWhole: heldWhole,
            rawRowsMB: round(median(raw)),
            pagedKeepRecent1000MB: round(median(small)),
          });
        },
      );
    },
  },
];
