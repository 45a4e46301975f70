// The store alone, opened for writing by a one-shot command (`runlog rebuild`, `runlog archive`): it takes the log's
// writer lock first, so it never writes beside a running supervisor (SUPERVISOR_RUNNING names the holder). The
// command gets the port, the store's archiving, and (SQLite's own) the snapshot table to rebuild.
import { resolvePaths } from '../config/paths.ts';
import { RunlogError } from '../domain/errors.ts';
import type { SnapshotReplacing } from '../inspect/inspection.ts';
import type { OpenedLog } from '../supervisor/open-log.ts';
import type { CommandArgs } from './command.ts';

/** The log as a writing one-shot command uses it. */
export interface WritableLog extends Pick<OpenedLog, 'store' | 'archiving'> {
  /** Where `rebuild --snapshots` writes the snapshots it folds (SQLite keeps them beside the port). */
  snapshots: SnapshotReplacing;
}

export async function withWritableLog<T>(
  args: Pick<CommandArgs, 'home' | 'db' | 'store'>,
  command: string,
  fn: (log: WritableLog) => Promise<T> | T,
): Promise<T> {
  if (args.store)
    throw new RunlogError(
      'NOT_SUPPORTED',
      `${command} works on a SQLite log; on PostgreSQL the store folds the actors projection in every append`,
    );
  const [{ SqlitePortStore }, { WriterLock }] = await Promise.all([
    import('../store/sqlite/port-adapter.ts'),
    import('../store/sqlite/writer-lock.ts'),
  ]);
  const db = resolvePaths({ home: args.home, db: args.db }).db;
  const lock = WriterLock.acquire(db, command);
  try {
    const store = new SqlitePortStore(db);
    try {
      const engine = store.store; // SQLite's engine under the port: its snapshot table
      return await fn({
        store,
        archiving: store,
        snapshots: { replaceSnapshots: (records) => engine.replaceSnapshots(records) },
      });
    } finally {
      await store.close();
    }
  } finally {
    lock.release();
  }
}
