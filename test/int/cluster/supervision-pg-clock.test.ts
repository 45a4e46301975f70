// `ps`, `inspect` and /api/status say whether a cluster's log is supervised by comparing its last heartbeat with the
// reader's clock. Beats on PostgreSQL carry the server's time, so a reader whose clock is off by an hour must still
// judge them right: the store hands the beat out on the reader's clock, from its age on the server's.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { supervision } from '../../../src/domain/supervision.ts';
import { PgHostStore } from '../../../src/store/postgres/host-store.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';

const HOUR = 3_600_000;
let url = '';
beforeAll(async () => {
  url = await requirePostgres();
});
afterAll(async () => {
  if (url) await dropSchemas(url);
});
afterEach(() => {
  vi.useRealTimers();
});

/** A reader opened with its clock moved by `skewMs` (only Date: the driver's timers run as they are). */
async function readerAt(schema: string, skewMs: number): Promise<{ store: PgHostStore; now: () => string }> {
  vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + skewMs, shouldAdvanceTime: true });
  const store = await PgHostStore.open({ url, schema, pollMs: 0 });
  return { store, now: () => new Date().toISOString() };
}

describe('a heartbeat on PostgreSQL read by a reader with a skewed clock', () => {
  it('a live supervisor is supervised for a reader an hour ahead (its beat is not an hour old)', async () => {
    const schema = testSchema('supclock');
    const node = await PgHostStore.open({ url, schema, pollMs: 0 });
    try {
      await node.writeHeartbeat({
        node: 'a',
        pid: 4242,
        startedAt: new Date().toISOString(),
        beatAt: new Date().toISOString(),
        intervalMs: 5000,
        stoppedAt: null,
      });
    } finally {
      await node.close();
    }
    const { store, now } = await readerAt(schema, HOUR);
    try {
      const sup = supervision(await store.readHeartbeat(), now());
      expect(sup).toMatchObject({ supervised: true, node: 'a', pid: 4242 });
    } finally {
      await store.close();
    }
  });

  it('a silent supervisor is not supervised for a reader an hour behind (its beat is not in the future)', async () => {
    const schema = testSchema('supclock');
    const node = await PgHostStore.open({ url, schema, pollMs: 0 });
    try {
      await node.writeHeartbeat({
        node: 'b',
        pid: 4343,
        startedAt: new Date().toISOString(),
        beatAt: new Date().toISOString(),
        intervalMs: 5000,
        stoppedAt: null,
      });
      // Its last beat was a minute ago on the server's clock: twelve intervals missed.
      await node.pg.sql(
        `UPDATE nodes SET beat_at = to_char((clock_timestamp() - interval '1 minute') AT TIME ZONE 'UTC', ` +
          `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') WHERE node = 'b'`,
        [],
      );
    } finally {
      await node.close();
    }
    const { store, now } = await readerAt(schema, -HOUR);
    try {
      const sup = supervision(await store.readHeartbeat(), now());
      expect(sup).toMatchObject({ supervised: false, node: 'b' });
      // The beat, on the reader's clock, is about a minute before the reader's now.
      const ageMs = Date.parse(now()) - Date.parse(sup.heartbeatAt!);
      expect(ageMs).toBeGreaterThan(55_000);
      expect(ageMs).toBeLessThan(120_000);
    } finally {
      await store.close();
    }
  });
});
