// How the inspection commands (ps, inspect, events, replay, export) open the log: the store alone — no actor
// host, no adapters — so `runlog ps` loads only the store reader and starts fast. Read-only: they never create
// or change a file (`rebuild`, which writes, goes through writable-log.ts). On PostgreSQL (--store postgres://…)
// they read through the host store's copy of the log, and never write either. That copy is opened as a
// supervisor's is (postgres/host-store.ts, pageOut): the actors rows, every live actor's and non-actor stream's
// events (of the request streams, the execution queue and placement, only the newest), and one summary row per ended
// actor instead of its events, so `ps` on a log of years reads what it lists, not the history. A command that reads one actor pages its history in first (resolveReadableActor); `events
// --all` reads what the copy lacks from the database a page at a time.
import { isRequestStream } from '../supervisor/cluster/request-streams.ts';
import { resolvePaths } from '../config/paths.ts';
import { StoreCorruptError } from '../domain/errors.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/supervisor
import type { ReadableLog } from '../store/host-store.ts';
import type { CommandArgs } from './command.ts';

type LogArgs = Pick<CommandArgs, 'home' | 'db' | 'store'>;

/** `follow`: the command tails the log, so it must see commits made after it opened (no immutable open). */
export async function openInspectionLog(args: LogArgs, follow = false): Promise<ReadableLog> {
  if (args.store) {
    const { PgHostStore } = await import('../store/postgres/host-store.ts');
    // One-shot: no polling until a --follow subscribes; two connections (the open reads the rows and the summary
    // side by side). No recent window: it is for a supervisor's followers, and a one-shot pages in what it reads.
    return PgHostStore.open({ url: args.store, pollMs: 0, maxConnections: 2, pageOut: { keepRecent: 0, requestStreams: { is: isRequestStream } } });
  }
  const { openEventStore } = await import('../store/sqlite/event-store.ts');
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

export async function withInspectionLog<T>(args: LogArgs, fn: (store: ReadableLog) => Promise<T> | T, follow = false): Promise<T> {
  const store = await openInspectionLog(args, follow);
  try {
    return await fn(store);
  } catch (err) {
    throw damageFound(store.file, err);
  } finally {
    await store.close();
  }
}
