// The store alone, opened for writing by a one-shot command (`runlog rebuild`): it takes the log's writer lock
// first, so it never writes beside a running supervisor (SUPERVISOR_RUNNING names the holder).
import { resolvePaths } from '../config/paths.ts';
import { RunlogError } from '../domain/errors.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/supervisor
import type { SqliteEventStore } from '../store/sqlite/event-store.ts';
import type { CommandArgs } from './command.ts';

export async function withWritableLog<T>(args: Pick<CommandArgs, 'home' | 'db' | 'store'>, command: string, fn: (store: SqliteEventStore) => Promise<T> | T): Promise<T> {
  if (args.store) throw new RunlogError('NOT_SUPPORTED', `${command} works on a SQLite log; on PostgreSQL the store folds the actors projection in every append`);
  const [{ openEventStore }, { WriterLock }] = await Promise.all([import('../store/sqlite/event-store.ts'), import('../store/sqlite/writer-lock.ts')]);
  const db = resolvePaths({ home: args.home, db: args.db }).db;
  const lock = WriterLock.acquire(db, command);
  try {
    const store = openEventStore(db);
    try {
      return await fn(store);
    } finally {
      store.close();
    }
  } finally {
    lock.release();
  }
}
