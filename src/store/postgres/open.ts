// Opening a PostgreSQL log from above the store: the port with its capabilities, what `verify` audits, and the
// channels `logs --follow` rides on between nodes. Callers see interfaces only, never the class behind them, so
// nothing outside src/store/ reaches into the store's internals.
import type { ClusterRecords } from '../../domain/cluster-nodes.ts';
import type {
  Archiving,
  Auditing,
  ChainVerifying,
  Leasing,
  Metered,
  Placement,
  Reconnecting,
} from '../capabilities.ts';
import type { EventStorePort } from '../port.ts';
import { checkPgArchives } from './archive-check.ts';
import { controlChannel, PgFollowBus, type FollowBus } from './follow-channel.ts';
import { PgHostStore, splitStoreUrl, type PgHostStoreOptions } from './host-store.ts';

/** A PostgreSQL log: the port, its capabilities, and the cluster's records (any opener, node or reader). */
export interface PostgresLog extends EventStorePort, Reconnecting, Metered, ChainVerifying, Archiving {
  /** This node's leases; null when opened without `node` (a reader, or a store that is not a cluster node). */
  readonly leasing: Leasing | null;
  /** Every node's heartbeat and every lease, read now and judged on the server's clock. */
  clusterRecords(): Promise<ClusterRecords>;
  /** Where an actor ran last and who owns it now. */
  placement(stream: string): Promise<Placement>;
  /** placement() of each stream, in one read of the database for those it asks about. */
  placements(streams: readonly string[]): Promise<Map<string, Placement>>;
}

/** LISTEN/NOTIFY on the log's database, outside the log: a node's control channel and the follow frames. */
export interface PostgresFollowChannels {
  bus: FollowBus;
  /** A node's control channel (where follows of its instances are asked for). */
  control(node: string): string;
  close(): void;
}

export interface OpenedPostgres {
  log: PostgresLog;
  /** The snapshots and archives `runlog verify` checks beside the events. */
  audit: Auditing;
  /** Made once per node: the bus connects when first listened on. */
  followChannels(log: (msg: string) => void): PostgresFollowChannels;
}

export async function openPostgresLog(options: PgHostStoreOptions): Promise<OpenedPostgres> {
  const store = await PgHostStore.open(options);
  const pg = store.pg;
  return {
    log: store,
    audit: {
      snapshots: () => pg.iterateSnapshots(),
      olderSnapshots: () => pg.iterateSnapshots({ history: true }),
      snapshotVersions: () => pg.snapshotVersions(),
      checkArchives: (dirs) => checkPgArchives(pg, { dirs }),
    },
    followChannels: (log) => {
      const bus = new PgFollowBus({
        url: splitStoreUrl(options.url).url,
        sql: (text, params) => pg.sql(text, params),
        log,
      });
      return { bus, control: (node) => controlChannel(pg.schema, node), close: () => bus.close() };
    },
  };
}
