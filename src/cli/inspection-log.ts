// How the inspection commands (ps, inspect, events, replay, export) open the log: the SQLite store alone — no
// actor host, no adapters — so `runlog ps` loads only the store reader and starts fast. Read-only: they never
// create or change a file (`rebuild`, which writes, goes through writable-log.ts).
import { resolvePaths } from '../actors/paths.ts';
import { StoreCorruptError } from '../domain/errors.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/actors
import type { SqliteEventStore } from '../store/sqlite-event-store.ts';
import type { CommandArgs } from './command.ts';

/** `follow`: the command tails the log, so it must see commits made after it opened (no immutable open). */
export async function openInspectionLog(args: Pick<CommandArgs, 'home' | 'db'>, follow = false): Promise<SqliteEventStore> {
  const { openEventStore } = await import('../store/sqlite-event-store.ts');
  return openEventStore(resolvePaths({ home: args.home, db: args.db }).db, { readOnly: true, followsWriters: follow });
}

/**
 * A read-only open checks the file's header and schema, not every page (that would delay the first line by a
 * second per 150 MB): a damaged page is found when a command reads it, and is the same STORE_CORRUPT (exit 4).
 */
function damageFound(file: string, err: unknown): unknown {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : '';
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') return new StoreCorruptError(file, (err as Error).message, { cause: err });
  return err;
}

export async function withInspectionLog<T>(args: Pick<CommandArgs, 'home' | 'db'>, fn: (store: SqliteEventStore) => Promise<T> | T, follow = false): Promise<T> {
  const store = await openInspectionLog(args, follow);
  try {
    return await fn(store);
  } catch (err) {
    throw damageFound(store.file, err);
  } finally {
    store.close();
  }
}
