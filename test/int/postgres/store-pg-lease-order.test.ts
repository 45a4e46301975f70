// Lease renewal and the fence check on the real PostgreSQL server lock lease rows in one order: a node renewing
// many leases while its fenced appends to the same actors commit (each locking their lease rows FOR SHARE) never
// ends in a deadlock PostgreSQL has to break, and no append or renewal fails. The interleaving that deadlocked
// before (the renewal holding one row and waiting for another that an append's fence had locked first) is also
// forced step by step.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { Leases } from '../../../src/store/postgres/leases.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';

let url = '';
const open: PgEventStore[] = [];
beforeAll(async () => {
  url = await requirePostgres();
});
afterAll(async () => {
  for (const s of open) await s.close().catch(() => undefined);
  if (url) await dropSchemas(url);
});

describe('lease renewal beside fenced appends', () => {
  it(
    'renewing 200 leases over and over while fenced appends to the same actors commit gives no deadlock and no failure',
    { timeout: 120_000 },
    async () => {
      const pg = await PgEventStore.open({ url, schema: testSchema('leaseorder'), maxConnections: 8 });
      open.push(pg);
      const leases = new Leases(pg, 'n', 60_000);
      // Acquired in a scrambled order (a fixed one): the rows lie, and come to a join, in no order the fence's shares.
      const streams = Array.from({ length: 200 }, (_, i) => `instance-s${String((i * 67) % 200).padStart(3, '0')}`);
      for (const s of streams) expect(await leases.acquire(s)).toBe(true);
      const failures: string[] = [];
      let appends = 0;
      let renewals = 0;
      const rounds = 100;
      const WORKERS = 2;
      const renewing = (async () => {
        for (let i = 0; i < rounds * 2; i++) {
          try {
            expect(await leases.renew()).toEqual([]);
            renewals += 1;
          } catch (err) {
            failures.push(`renew: ${(err as Error).message}`);
          }
        }
      })();
      const appending = Array.from({ length: WORKERS }, async (_, w) => {
        for (let i = 0; i < rounds; i++) {
          // Each worker appends to one half of the actors (every other one), all fenced.
          const mine = [...streams].sort().filter((_, j) => j % 2 === w % 2);
          try {
            const out = await pg.appendMany(
              mine.map((stream) => ({
                stream,
                events: [{ type: 'instance.noted', data: { w, i } }],
                expectedVersion: 'any' as const,
              })),
              { fence: { node: 'n', tokens: leases.held, ttlMs: 60_000 } },
            );
            const refused = out.filter((o) => !o.ok);
            if (refused.length > 0) failures.push(`append refused: ${(refused[0] as { error: Error }).error.message}`);
            else appends += 1;
          } catch (err) {
            failures.push(`append: ${(err as Error).message}`);
          }
        }
      });
      await Promise.all([renewing, ...appending]);
      expect(failures).toEqual([]);
      expect(appends).toBe(WORKERS * rounds);
      expect(renewals).toBe(rounds * 2);
      expect(await pg.lastSeq()).toBe(WORKERS * rounds * 100);
    },
  );

  it(
    'a renewal waiting on a lease row while a fence check locks the rows in stream order does not deadlock with it',
    { timeout: 60_000 },
    async () => {
      const schema = testSchema('leaseorder');
      const store = await PgEventStore.open({ url, schema });
      open.push(store);
      const leases = new Leases(store, 'n', 60_000);
      // Held in the order s2, s1: the renewal used to lock them in that order, the fence locks s1 then s2.
      for (const s of ['instance-s2', 'instance-s1']) expect(await leases.acquire(s)).toBe(true);
      // Another append's transaction holds s1 (its fence check, FOR SHARE).
      const other = new pg.Client({ connectionString: url });
      await other.connect();
      try {
        await other.query(`SET search_path TO ${schema}`);
        await other.query('BEGIN');
        await other.query("SELECT stream FROM leases WHERE stream = 'instance-s1' FOR SHARE");
        const renewed = leases.renew().then(
          (lost) => ({ lost }),
          (err: Error) => ({ err: err.message }),
        );
        await waitForLockWaiters(other, 1);
        const appended = store
          .appendMany(
            ['instance-s1', 'instance-s2'].map((stream) => ({
              stream,
              events: [{ type: 'instance.noted', data: {} }],
              expectedVersion: 'any' as const,
            })),
            { fence: { node: 'n', tokens: leases.held, ttlMs: 60_000 } },
          )
          .then(
            (out) => ({ ok: out.map((o) => o.ok) }),
            (err: Error) => ({ err: err.message }),
          );
        await waitForLockWaiters(other, 2).catch(() => undefined); // the append may not have to wait at all
        await other.query('COMMIT');
        expect(await renewed).toEqual({ lost: [] });
        expect(await appended).toEqual({ ok: [true, true] });
      } finally {
        await other.end();
      }
    },
  );
});

/** Resolves once at least `n` sessions of this database wait for a lock. */
async function waitForLockWaiters(c: pg.Client, n: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const { rows } = await c.query<{ n: number }>(
      "SELECT count(*)::integer AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    );
    if (rows[0]!.n >= n) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`fewer than ${n} sessions came to wait for a lock`);
}
