// Opening the log a runlog runs on: a SQLite file, or PostgreSQL (a cluster node's store, its actors leased to it).
// A supervisor checks the tail of the hash chain before anything is read from the log or appended to it. The log
// is returned with its kind, so callers reach what only one kind of store has without a cast.
import { StoreChainError } from '../domain/errors.ts';
import type { PgHostStore } from '../store/postgres/host-store.ts';
import { SqliteEventStore } from '../store/sqlite/event-store.ts';
import { isRequestStream } from './cluster/request-streams.ts';
import { RenewalRelay } from './cluster/self-fence.ts';
import type { RunlogOptions } from './runlog-api.ts';

export const DEFAULT_LEASE_TTL_MS = 15_000;

/** How many of the last events a supervisor checks against the hash chain as it starts. */
const TAIL_CHECK = 1000;

/** On PostgreSQL, `renewals` carries the store's lease renewal reports to the node's self-fence, started later. */
export type OpenedLog = { kind: 'sqlite'; store: SqliteEventStore } | { kind: 'pg'; store: PgHostStore; renewals: RenewalRelay };

/** Opens the log (`pgUrl`: on PostgreSQL, else the SQLite file `db`); a supervisor's has its chain's tail checked. */
export async function openLog(options: RunlogOptions, db: string, readOnly: boolean, pgUrl: string | undefined, node: string | undefined, supervise: boolean): Promise<OpenedLog> {
  const opened = await openStore(options, db, readOnly, pgUrl, node);
  if (supervise) await checkTail(opened);
  return opened;
}

async function openStore(options: RunlogOptions, db: string, readOnly: boolean, pgUrl: string | undefined, node: string | undefined): Promise<OpenedLog> {
  if (!pgUrl) return { kind: 'sqlite', store: new SqliteEventStore(db, { synchronous: options.synchronous, readOnly, ...(options.now ? { now: options.now } : {}) }) };
  // Loaded only for PostgreSQL: a SQLite supervisor never loads node-postgres.
  const [{ PgHostStore }, { actorsProjection, ACTORS_PROJECTION }] = await Promise.all([import('../store/postgres/host-store.ts'), import('./host/actors-projection.ts')]);
  const renewals = new RenewalRelay();
  const store = await PgHostStore.open({
    url: pgUrl,
    projections: [actorsProjection()],
    actorRows: { projection: ACTORS_PROJECTION },
    ...(node ? { node: { name: node, leaseTtlMs: options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS, renewals, ...(options.collectGraceMs !== undefined ? { collectGraceMs: options.collectGraceMs } : {}) } } : {}),
    // A supervisor holds live actors, not the fleet's whole history: ended actors' events are read when asked, and
    // of the request streams only the requests that may still be open (request-streams.ts).
    ...(node ? { pageOut: { ...(options.pgKeepRecent !== undefined ? { keepRecent: options.pgKeepRecent } : {}), requestStreams: { is: isRequestStream } } } : {}),
    ...(options.now ? { now: options.now } : {}),
    ...(options.faults ? { faults: options.faults } : {}),
  });
  return { kind: 'pg', store, renewals };
}

/** The tail of the hash chain (the whole log: runlog verify); the log is closed when it fails. */
async function checkTail(opened: OpenedLog): Promise<void> {
  if (opened.kind === 'sqlite') {
    const store = opened.store;
    try {
      store.assertChain({ afterSeq: store.lastSeq() - TAIL_CHECK });
    } catch (err) {
      store.close();
      throw err;
    }
    return;
  }
  // The same tail check on PostgreSQL (one snapshot of the log: other nodes may be appending meanwhile).
  const pgLog = opened.store;
  const tail = await pgLog.pg.verifyChain({ afterSeq: pgLog.lastSeq() - TAIL_CHECK }).catch(async (err: unknown) => {
    await pgLog.close();
    throw err;
  });
  if (!tail.ok) {
    await pgLog.close();
    throw new StoreChainError(pgLog.file, tail.seq, tail.reason, { stream: tail.stream, version: tail.version });
  }
}
