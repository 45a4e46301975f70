// A supervisor on PostgreSQL does not carry every request the cluster ever made (postgres/host-store.ts pageOut
// requestStreams, log-copy.ts, supervisor/cluster/request-streams.ts): against the real server, the execution queue's and a
// placement stream's requests older than the recent window and than keepMs are neither read at open nor held;
// the newest ones are, from one version on (readRecent, what the queue, placement and hand-over read); a read of
// the whole stream is never answered short: what memory does not hold comes from the database, equal to the log.
import { afterAll, describe, expect, it } from 'vitest';
import { EXECUTION_QUEUE } from '../../../src/supervisor/executions/execution-queue.ts';
import { placementStream } from '../../../src/supervisor/cluster/placement.ts';
import { isRequestStream } from '../../../src/supervisor/cluster/request-streams.ts';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { PgHostStore, REQUEST_KEEP_MS } from '../../../src/store/postgres/host-store.ts';
import { collect } from '../../../src/store/port.ts';
import { testSchema, usePostgres } from '../../support/postgres.ts';

const pgt = usePostgres();
const opened: { close(): unknown }[] = [];
afterAll(async () => {
  for (const o of opened.reverse()) await o.close();
});

async function whole(store: PgEventStore, stream: string): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  for await (const e of store.readStream(stream)) out.push(e);
  return out;
}

describe('request streams on a PostgreSQL supervisor', () => {
  it(
    'holds only the newest requests of the queue and placement streams; the rest is read when asked, never answered short',
    { timeout: 120_000 },
    async () => {
      const schema = testSchema('requests');
      const url = `${pgt.url}?schema=${schema}`;
      const log = await PgEventStore.open({ url: pgt.url, schema });
      opened.push(log);
      const now = Date.now();
      const at = (msAgo: number) => new Date(now - msAgo).toISOString();
      const old = REQUEST_KEEP_MS + 3600_000;
      const request = (n: number, msAgo: number) => ({
        type: 'execution.queued',
        data: { executionId: `x${n}` },
        at: at(msAgo),
      });
      // 30 requests older than keepMs, 5 within it, then one more whose writer's clock is behind (an old `at` after
      // recent ones: kept, the cut is one version), and a placement stream with only old requests.
      await log.appendToStream(
        EXECUTION_QUEUE,
        Array.from({ length: 30 }, (_, i) => request(i, old)),
        { expectedVersion: 'no-stream' },
      );
      await log.appendToStream(
        EXECUTION_QUEUE,
        Array.from({ length: 5 }, (_, i) => request(30 + i, 3600_000)),
        { expectedVersion: 30 },
      );
      await log.appendToStream(EXECUTION_QUEUE, [request(35, old)], { expectedVersion: 35 });
      await log.appendToStream(
        placementStream('n1'),
        Array.from({ length: 10 }, (_, i) => ({
          type: 'placement.spawn-requested',
          data: { instanceId: `i${i}` },
          at: at(old),
        })),
        { expectedVersion: 'no-stream' },
      );
      // The recent window (10 positions) holds none of them: 20 facts of a stream that is not a request stream.
      await log.appendToStream(
        'reconciler',
        Array.from({ length: 20 }, (_, i) => ({ type: 'fact', data: { i }, at: at(old) })),
        { expectedVersion: 'no-stream' },
      );

      const queue = await whole(log, EXECUTION_QUEUE);
      const placement = await whole(log, placementStream('n1'));
      const supervisor = await PgHostStore.open({
        url,
        pollMs: 0,
        pageOut: { keepRecent: 10, requestStreams: { is: isRequestStream } },
      });
      opened.push(supervisor);
      expect(supervisor.loadStats.requestEventsPagedOut).toBe(40);
      expect(await supervisor.readRecent(EXECUTION_QUEUE)).toEqual(queue.slice(30));
      expect(await supervisor.readRecent(placementStream('n1'))).toEqual([]);
      expect(await supervisor.streamVersion(EXECUTION_QUEUE)).toBe(36);
      expect(await supervisor.streamVersion(placementStream('n1'))).toBe(10);
      // A stream that is not a request stream is held whole, however old.
      expect(await collect(supervisor.readStream('reconciler'))).toHaveLength(20);
      expect(supervisor.heldEvents).toBe(6 + 20);
      // The whole of each request stream, and any range of it, reads complete (its older part from the database).
      expect(await collect(supervisor.readStream(EXECUTION_QUEUE))).toEqual(queue);
      expect(await collect(supervisor.readStream(placementStream('n1')))).toEqual(placement);
      expect(await collect(supervisor.readStream(EXECUTION_QUEUE, { from: 29, to: 32 }))).toEqual(queue.slice(28, 32));
      // Reading it held nothing more in memory.
      expect(supervisor.heldEvents).toBe(6 + 20);

      // A store that holds everything (a one-shot reader without pageOut, verify) reads them all.
      const holder = await PgHostStore.open({ url, pollMs: 0 });
      opened.push(holder);
      expect(await holder.readRecent(EXECUTION_QUEUE)).toEqual(queue);
      expect(holder.loadStats.requestEventsPagedOut).toBe(0);
    },
  );
});
