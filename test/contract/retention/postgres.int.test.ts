// The retention specs on PostgreSQL (specs.ts), against the real server (`npm run setup`); a schema per log.
import { PgHostStore } from '../../../src/store/postgres/host-store.ts';
import { testSchema, usePostgres } from '../../support/postgres.ts';
import { retentionSpecs } from './specs.ts';

const db = usePostgres();

retentionSpecs('PostgreSQL', {
  newLog: () => {
    const schema = testSchema('retspec');
    const store = `${db.url}?schema=${schema}`;
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
          await db.admin.query(`DELETE FROM ${schema}.snapshots WHERE stream = $1`, [stream]);
        },
      },
    });
  },
});
