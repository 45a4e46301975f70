// The event-store contract on SQLite (SqlitePortStore over the SqliteEventStore engine), a temp file per test.
import { join } from 'node:path';
import { SqlitePortStore } from '../../../src/store/sqlite/port-adapter.ts';
import { tempDir } from '../../support/tmp.ts';
import { eventStoreContract } from './contract.ts';

eventStoreContract('sqlite', {
  open: async (options) => new SqlitePortStore(join(tempDir('runlog-contract-'), 'log.db'), options),
  // Another connection on the same file: what a second process (runlog ps, events --follow) opens.
  second: async (first, options) => new SqlitePortStore(first.description, options),
  // It writes the actors row each append carries to its actors table, in the append's transaction.
  actorRows: 'given',
});
