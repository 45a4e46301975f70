// The event-store contract on PostgreSQL, against the real server (`npm run setup`); a schema per test.
import { afterAll, beforeAll } from 'vitest';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';
import { eventStoreContract } from './contract.ts';

let url = '';
beforeAll(async () => {
  url = await requirePostgres();
});
afterAll(async () => {
  if (url) await dropSchemas(url);
});

eventStoreContract('postgres', {
  open: (options) => PgEventStore.open({ ...options, url, schema: testSchema() }),
  // Another pool on the same schema: what a second supervisor (or `runlog events --follow`) opens.
  second: (first, options) => PgEventStore.open({ ...options, url, schema: (first as PgEventStore).schema }),
});
