// A projection rebuilt on PostgreSQL (pg-rebuild.ts) never leaves the global append lock with a session that sits
// between two statements: a client that stopped there (paused, swapped out) would hold every node's appends until
// idle_in_transaction_session_timeout. Against the real server (`npm run setup`), a schema of its own: while a
// rebuild folds 20,000 events on a store of one connection, another session samples that connection's locks and
// state, and a second store appends all along.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { APPEND_LOCK_CLASS } from '../../../src/store/postgres/schema.ts';
import type { Projection } from '../../../src/store/port.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';

let url = '';
beforeAll(async () => {
  url = await requirePostgres();
});
afterAll(async () => {
  if (url) await dropSchemas(url);
});

const counter: Projection<{ count: number }> = { name: 'counter', evolve: (doc) => ({ count: (doc?.count ?? 0) + 1 }) };

describe('a projection rebuilt on PostgreSQL', () => {
  it(
    'holds the append lock only inside one statement: no session holds it idle between statements, and appends go on meanwhile',
    { timeout: 120_000 },
    async () => {
      const schema = testSchema('rebuild');
      const store = await PgEventStore.open({ url, schema, projections: [counter], maxConnections: 1 });
      const other = await PgEventStore.open({ url, schema, projections: [counter] });
      const [{ pid }] = (await store.sql<{ pid: number }>('SELECT pg_backend_pid() AS pid', [])) as [{ pid: number }];
      const sampler = new pg.Client({ connectionString: url });
      await sampler.connect();
      try {
        for (let b = 0; b < 20; b++) {
          await store.appendMany(
            Array.from({ length: 100 }, (_, i) => ({
              stream: `order-${b}-${i}`,
              expectedVersion: 'any' as const,
              events: Array.from({ length: 10 }, () => ({ type: 'order.noted', data: {} })),
            })),
          );
        }
        let done = false;
        // The rebuild's session seen holding the append lock in a transaction while running no statement.
        const idleHolders: string[] = [];
        const sampling = (async () => {
          while (!done) {
            const { rows } = await sampler.query<{ state: string }>(
              `SELECT a.state FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE a.pid = $2 AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = $1::bigint::oid
               AND l.objid = ((hashtext($3)::bigint + 4294967296) % 4294967296)::oid AND a.state = 'idle in transaction'`,
              [APPEND_LOCK_CLASS, pid, schema],
            );
            idleHolders.push(...rows.map((r) => r.state));
          }
        })();
        let appended = 0;
        const appending = (async () => {
          while (!done) {
            await other.appendMany([
              { stream: 'order-meanwhile', expectedVersion: 'any', events: [{ type: 'order.noted', data: {} }] },
            ]);
            appended += 1;
          }
        })();
        const rebuilt = await store.rebuildProjection('counter');
        done = true;
        await Promise.all([sampling, appending]);
        expect(idleHolders).toEqual([]);
        expect(appended).toBeGreaterThan(0);
        // Exact as of its commit: every stream's count, the one appended meanwhile up to the rebuild's head.
        expect(rebuilt.documents).toBe(2001);
        expect(await store.projection<{ count: number }>('counter').get('order-7-42')).toEqual({ count: 10 });
        const meanwhile = (await store.projection<{ count: number }>('counter').get('order-meanwhile'))!.count;
        expect(meanwhile).toBe(appended);
      } finally {
        await sampler.end();
        await Promise.all([store.close(), other.close()]);
      }
    },
  );
});
