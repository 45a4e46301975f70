// Opening the log a runlog runs on: a SQLite file, or PostgreSQL (a cluster node's store, its actors leased to it).
// The store comes back as the one port plus the capabilities this kind of store has, each checked here once, so
// no service probes for a method or casts to a store class. A supervisor checks the tail of the hash chain before
// anything is read from the log or appended to it.
import { StoreChainError } from '../domain/errors.ts';
import type { Archiving, ChainVerifying, Leasing, Metered, Reconnecting } from '../store/capabilities.ts';
import type { EventStorePort } from '../store/port.ts';
import type { FollowChannels } from './cluster/cluster-services.ts';
import type { ClusterRecordsSource } from './cluster/nodes.ts';
import { SqlitePortStore } from '../store/sqlite/port-adapter.ts';
import { isRequestStream } from './cluster/request-streams.ts';
import { RenewalRelay } from './cluster/self-fence.ts';
import type { RunlogOptions } from './runlog-api.ts';

export const DEFAULT_LEASE_TTL_MS = 15_000;

/** How many of the last events a supervisor checks against the hash chain as it starts. */
const TAIL_CHECK = 1000;

/**
 * A cluster node's part of the log: its leases, the relay carrying their renewals to its self-fence, and the
 * channels `logs --follow` rides on between nodes (LISTEN/NOTIFY on the same database, outside the log).
 */
export interface ClusterLog {
  leasing: Leasing;
  renewals: RenewalRelay;
  follows: FollowChannels;
}

/** The log, and what its store can do beyond the port. */
export interface OpenedLog {
  kind: 'sqlite' | 'pg';
  store: EventStorePort;
  chain: ChainVerifying;
  metered: Metered;
  archiving: Archiving;
  /** A store that can be briefly unreachable (PostgreSQL); null for a file. */
  reconnecting: Reconnecting | null;
  /** Set when this process is a node of a cluster (PostgreSQL with a node name). */
  cluster: ClusterLog | null;
  /** The cluster's node and lease records (any PostgreSQL log, node or reader); null on SQLite. */
  clusterRecords: ClusterRecordsSource | null;
}

/** Opens the log (`pgUrl`: on PostgreSQL, else the SQLite file `db`); a supervisor's has its chain's tail checked. */
export async function openLog(
  options: RunlogOptions,
  db: string,
  readOnly: boolean,
  pgUrl: string | undefined,
  node: string | undefined,
  supervise: boolean,
  log: (msg: string) => void,
): Promise<OpenedLog> {
  const opened = pgUrl ? await openPostgres(options, pgUrl, node, log) : openSqlite(options, db, readOnly);
  if (supervise) await checkTail(opened);
  return opened;
}

function openSqlite(options: RunlogOptions, db: string, readOnly: boolean): OpenedLog {
  const store = new SqlitePortStore(db, {
    synchronous: options.synchronous,
    readOnly,
    ...(options.now ? { now: options.now } : {}),
  });
  return {
    kind: 'sqlite',
    store,
    chain: store,
    metered: store,
    archiving: store,
    reconnecting: null,
    cluster: null,
    clusterRecords: null,
  };
}

async function openPostgres(
  options: RunlogOptions,
  url: string,
  node: string | undefined,
  log: (msg: string) => void,
): Promise<OpenedLog> {
  // Loaded only for PostgreSQL: a SQLite supervisor never loads node-postgres.
  const [{ openPostgresLog }, { actorsProjection, ACTORS_PROJECTION }] = await Promise.all([
    import('../store/postgres/open.ts'),
    import('./host/actors-projection.ts'),
  ]);
  const renewals = new RenewalRelay();
  const opened = await openPostgresLog({
    url,
    projections: [actorsProjection()],
    actorRows: { projection: ACTORS_PROJECTION },
    ...(node
      ? {
          node: {
            name: node,
            leaseTtlMs: options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS,
            renewals,
            ...(options.collectGraceMs !== undefined ? { collectGraceMs: options.collectGraceMs } : {}),
          },
        }
      : {}),
    // A supervisor holds live actors, not the fleet's whole history: ended actors' events are read when asked, and
    // of the request streams only the requests that may still be open (request-streams.ts).
    ...(node
      ? {
          pageOut: {
            ...(options.pgKeepRecent !== undefined ? { keepRecent: options.pgKeepRecent } : {}),
            requestStreams: { is: isRequestStream },
          },
        }
      : {}),
    ...(options.now ? { now: options.now } : {}),
    ...(options.faults ? { faults: options.faults } : {}),
  });
  const store = opened.log;
  const leasing = store.leasing;
  const clusterRecords: ClusterRecordsSource = { clusterRecords: () => store.clusterRecords() };
  const cluster = leasing ? { leasing, renewals, follows: opened.followChannels(log) } : null;
  return {
    kind: 'pg',
    store,
    chain: store,
    metered: store,
    archiving: store,
    reconnecting: store,
    cluster,
    clusterRecords,
  };
}

/** The tail of the hash chain (the whole log: runlog verify); the log is closed when it fails. */
async function checkTail(opened: OpenedLog): Promise<void> {
  const { store } = opened;
  try {
    const tail = await opened.chain.verifyChain({ afterSeq: Math.max(0, (await store.lastSeq()) - TAIL_CHECK) });
    if (!tail.ok)
      throw new StoreChainError(store.description, tail.seq, tail.reason, {
        stream: tail.stream,
        version: tail.version,
      });
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
}
