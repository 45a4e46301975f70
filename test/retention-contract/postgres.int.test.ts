// The retention specs on PostgreSQL (specs.ts), against the real server (`npm run setup`); a schema per log.
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { PgHostStore } from '../../src/store/postgres/pg-host-store.ts';
import { dropSchemas, requirePostgres, testSchema } from '../support/postgres.ts';
import { retentionSpecs } from './specs.ts';

let url = '';
let admin: pg.Client;
beforeAll(async () => {
  url = await requirePostgres();
  admin = new pg.Client({ connectionString: url });
  await admin.connect();
});
afterAll(async () => {
  await admin?.end();
  if (url) await dropSchemas(url);
});

retentionSpecs('PostgreSQL', {
  newLog: () => {
    const schema = testSchema('retspec');
    const store = `${url}?schema=${schema}`;
    return Promise.resolve({
      store,
      log: {
        where: ['--store', store],
        read: async (fn) => {
          const s = await PgHostStore.open({ url: store, pollMs: 0, maxConnections: 2 });
          try {
            return await fn(s);
          } finally {
            await s.close();
          }
        },
        deleteSnapshot: async (stream) => {
          await admin.query(`DELETE FROM ${schema}.snapshots WHERE stream = $1`, [stream]);
        },
      },
    });
  },
});
