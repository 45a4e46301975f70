// A PostgreSQL follower shows an actor's event only once it holds that actor's row as new as the event: a reader
// handed an event by its subscription and asking for the actor then (what `events --follow --store` does to know
// the actor has ended) must not find the row from before it. Real PostgreSQL; another handle writes, event by
// event, the golden histories (each ends in a terminal state) while the follower's subscription polls hard.
import { afterAll, describe, expect, it } from 'vitest';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { PgHostStore } from '../../../src/store/postgres/host-store.ts';
import { actorsProjection } from '../../../src/supervisor/host/actors-projection.ts';
import { until } from '../../support/apps.ts';
import { endedHistories } from '../../support/pg-ended-log.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';

const closers: (() => Promise<unknown>)[] = [];
let url = '';
afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => undefined);
  if (url) await dropSchemas(url);
});

describe("a PostgreSQL follower's actor rows keep up with the events it shows", () => {
  it(
    'an actor read while its event is handled has at least that event’s version, and is terminal at its last event',
    { timeout: 120_000 },
    async () => {
      url = await requirePostgres();
      const schema = testSchema('roworder');
      const writer = await PgEventStore.open({ url, schema, projections: [actorsProjection()] });
      closers.push(() => writer.close());
      // As `runlog events --follow --store` opens it: a one-shot reader that starts following when it subscribes.
      const reader = await PgHostStore.open({ url, schema, pollMs: 0, maxConnections: 2, pageOut: { keepRecent: 0 } });
      closers.push(() => reader.close());

      const behind: string[] = [];
      let handled = 0;
      let endedSeen = 0;
      const sub = reader.subscribe({ from: 1, pollMs: 1 }, async (e) => {
        const id = e.stream.slice(e.stream.indexOf('-') + 1);
        const row = await reader.getActor(id);
        if (!row || row.version < e.version) behind.push(`${e.stream} v${e.version}: row at v${row?.version}`);
        else if (row.status === 'terminal') endedSeen += 1;
        handled += 1;
      });
      closers.push(() => sub.close());

      const histories = endedHistories();
      let written = 0;
      for (let k = 0; k < 24; k++) {
        const h = histories[k % histories.length]!;
        const id = `roworder${k}`;
        for (const [i, e] of h.events.entries()) {
          const data = JSON.parse(JSON.stringify(e.data).replaceAll(h.header.id, id)) as Record<string, unknown>;
          await writer.appendToStream(`${h.header.kind}-${id}`, [{ type: e.type, at: e.at, data, meta: e.meta }], {
            expectedVersion: i === 0 ? 'no-stream' : i,
          });
          written += 1;
        }
      }
      await until('the follower handled every event', () => handled === written, 60_000, 10);
      expect(behind).toEqual([]);
      expect(endedSeen).toBeGreaterThanOrEqual(24);
    },
  );
});
