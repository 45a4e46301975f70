// How the inspection commands (ps, inspect, events, replay, export, rebuild) open the log: the SQLite store
// alone — no actor host, no adapters — so `runlog ps` loads only the store reader and starts fast. They open it
// read-only (never create or change a file); `rebuild`, the one that writes, takes the log's writer lock first.
import { resolvePaths } from '../actors/paths.ts';
import type { SqliteEventStore } from '../store/sqlite-event-store.ts';
import type { CommandArgs } from './command.ts';

export async function openInspectionLog(args: Pick<CommandArgs, 'home' | 'db'>): Promise<SqliteEventStore> {
  const { openEventStore } = await import('../store/sqlite-event-store.ts');
  return openEventStore(resolvePaths({ home: args.home, db: args.db }).db, { readOnly: true });
}

export async function withInspectionLog<T>(
  args: Pick<CommandArgs, 'home' | 'db'>,
  fn: (store: SqliteEventStore) => Promise<T> | T,
  write?: { command: string },
): Promise<T> {
  if (write) {
    const [{ openEventStore }, { WriterLock }] = await Promise.all([import('../store/sqlite-event-store.ts'), import('../store/writer-lock.ts')]);
    const db = resolvePaths({ home: args.home, db: args.db }).db;
    const lock = WriterLock.acquire(db, write.command);
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
  const store = await openInspectionLog(args);
  try {
    return await fn(store);
  } finally {
    store.close();
  }
}
