// Subscriptions on PostgreSQL hear of other processes' commits through LISTEN/NOTIFY, not only by polling: with
// the polling fallback set to an hour, a commit through another handle (another connection pool, as another
// process has) still reaches a PgEventStore subscription and a PgHostStore follower (what `events --follow`,
// the inspector's live stream and a supervisor's copy of the log use). Real PostgreSQL, a schema of its own.
import { afterAll, describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { PgHostStore } from '../../../src/store/postgres/host-store.ts';
import { until } from '../../support/apps.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';

const HOUR = 3_600_000;
const closers: (() => Promise<unknown>)[] = [];
let url = '';
afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => undefined);
  if (url) await dropSchemas(url);
});

describe("PostgreSQL subscriptions hear other processes' commits (LISTEN/NOTIFY)", () => {
  it(
    'a port subscription and a host-store follower see a commit made through another handle, with polling an hour away',
    { timeout: 120_000 },
    async () => {
      url = await requirePostgres();
      const schema = testSchema('notify');
      const writer = await PgEventStore.open({ url, schema });
      closers.push(() => writer.close());
      const reader = await PgEventStore.open({ url, schema });
      closers.push(() => reader.close());
      const follower = await PgHostStore.open({ url, schema, pollMs: 0 });
      closers.push(() => follower.close());

      const heard: number[] = [];
      const sub = reader.subscribe({ from: 1, pollMs: HOUR }, (e) => void heard.push(e.seq));
      closers.push(() => sub.close());
      const followed: RecordedEvent[] = [];
      const followSub = follower.subscribe({ from: 1, pollMs: HOUR }, (e) => void followed.push(e));
      closers.push(() => followSub.close());
      // Both have read the (empty) log once and now wait on a timer an hour long.
      await new Promise((r) => setTimeout(r, 500));

      for (let i = 1; i <= 3; i++) {
        await writer.appendToStream(`s-${i}`, [{ type: 'thing.happened', data: { i } }], {
          expectedVersion: 'no-stream',
        });
        await until(`the subscription hears commit ${i}`, () => heard.length === i, 30_000, 20);
        await until(`the follower hears commit ${i}`, () => followed.length === i, 30_000, 20);
      }
      expect(heard).toEqual([1, 2, 3]);
      expect(followed.map((e) => [e.seq, e.stream, e.data])).toEqual([
        [1, 's-1', { i: 1 }],
        [2, 's-2', { i: 2 }],
        [3, 's-3', { i: 3 }],
      ]);
      // A closed subscription stops listening: the store's notification connection goes when its last listener does.
      await sub.close();
      expect(sub.position).toBe(3);
    },
  );
});
