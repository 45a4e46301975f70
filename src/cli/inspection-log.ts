// How the inspection commands (ps, inspect, events, replay, export, nodes) open the log: the store alone — no actor
// host, no adapters — so `runlog ps` loads only the store and starts fast. Read-only: they never create or change
// a file (`rebuild`, which writes, goes through writable-log.ts). Every read goes through the store port, a page
// at a time. On PostgreSQL (--store postgres://…) the log is opened as a one-shot reader: the actors rows at open,
// an actor's history read from the database when a command asks for it, and the cluster's own records (where each
// actor ran, who owns it, every node's heartbeat) beside the port.
import { resolvePaths } from '../config/paths.ts';
import type { ClusterRecords } from '../domain/cluster-nodes.ts';
import { StoreCorruptError } from '../domain/errors.ts';
import type { EventStorePort } from '../index.ts';
import { isRequestStream } from '../supervisor/cluster/request-streams.ts';
import type { CommandArgs } from './command.ts';

type LogArgs = Pick<CommandArgs, 'home' | 'db' | 'store'>;

/** What a cluster's log (PostgreSQL) says beyond the port: where actors run, and every node's heartbeat and leases. */
export interface ClusterReads {
  /** Of each stream, the node that appended its latest event, and the node that holds its lease now (null once it ended). */
  placements(streams: readonly string[]): Promise<Map<string, { node: string | null; owner: string | null }>>;
  /** Every node's heartbeat and every lease, read from the database now. */
  clusterRecords(): Promise<ClusterRecords>;
}

/** The log as an inspection command reads it. */
export interface InspectionLog {
  store: EventStorePort;
  /** Set on a cluster's log (PostgreSQL); null on SQLite (one supervisor, no leases). */
  cluster: ClusterReads | null;
}

/** `follow`: the command tails the log, so it must see commits made after it opened (no immutable open). */
export async function openInspectionLog(args: LogArgs, follow = false): Promise<InspectionLog> {
  if (args.store) {
    const { openPostgresLog } = await import('../store/postgres/open.ts');
    // One-shot: no polling until a --follow subscribes; two connections (the open reads the rows and the summary
    // side by side). No recent window: it is for a supervisor's followers; a one-shot reads what it asks for.
    const { log: store } = await openPostgresLog({
      url: args.store,
      pollMs: 0,
      maxConnections: 2,
      pageOut: { keepRecent: 0, requestStreams: { is: isRequestStream } },
    });
    return {
      store,
      cluster: { placements: (streams) => store.placements(streams), clusterRecords: () => store.clusterRecords() },
    };
  }
  const { SqlitePortStore } = await import('../store/sqlite/port-adapter.ts');
  return {
    store: new SqlitePortStore(resolvePaths({ home: args.home, db: args.db }).db, {
      readOnly: true,
      followsWriters: follow,
    }),
    cluster: null,
  };
}

/**
 * A read-only open checks the file's header and schema, not every page (that would delay the first line by a
 * second per 150 MB): a damaged page is found when a command reads it, and is the same STORE_CORRUPT (exit 4).
 */
function damageFound(file: string, err: unknown): unknown {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : '';
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB')
    return new StoreCorruptError(file, (err as Error).message, { cause: err });
  return err;
}

export async function withInspectionLog<T>(
  args: LogArgs,
  fn: (log: InspectionLog) => Promise<T> | T,
  follow = false,
): Promise<T> {
  const log = await openInspectionLog(args, follow);
  try {
    return await fn(log);
  } catch (err) {
    throw damageFound(log.store.description, err);
  } finally {
    await log.store.close();
  }
}
