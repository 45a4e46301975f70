// The nodes of a cluster's log, as the inspector, `GET /api/nodes` and `runlog nodes` show them: each
// supervisor's last heartbeat and its age, whether it is live, and the actors it owns through leases. Pure: the
// store hands in what it read (the `nodes` and `leases` tables, each lease judged expired or not on PostgreSQL's
// clock), the caller passes the time; a heartbeat's age is measured like `ps`'s supervision (supervision.ts:
// missing three beats means gone). On PostgreSQL beats are written on the server's clock and the caller passes
// the server's time (supervisor/cluster/nodes.ts), so every reader agrees whatever its own clock says.
import { supervision, type HeartbeatRecord } from './supervision.ts';
import { msBetween } from './time.ts';

/** A row of the `nodes` table: one supervisor's heartbeat. */
export interface NodeRecord extends HeartbeatRecord {
  /** The host it runs on (null: not recorded, SQLite's heartbeat). */
  host: string | null;
}

/** A row of the `leases` table, with its expiry judged on the database server's clock (what fencing uses). */
export interface LeaseRecord {
  stream: string;
  node: string;
  token: number;
  expiresAt: string;
  /** Milliseconds until it expires on the server's clock (negative: expired that long ago). */
  expiresInMs: number;
}

export interface ClusterRecords {
  /** The database server's time when read: beats are written on its clock, so ages are measured against it. */
  at?: string;
  nodes: NodeRecord[];
  leases: LeaseRecord[];
}

export interface OwnedActor {
  id: string;
  kind: string;
  /** The actor's state in the log (null: not in this reader's copy yet). */
  state: string | null;
  token: number;
  expiresAt: string;
  expiresInMs: number;
  expired: boolean;
}

export interface NodeView {
  node: string;
  /** Null for a node that holds leases but never wrote a heartbeat row (should not happen; shown, not hidden). */
  host: string | null;
  pid: number | null;
  startedAt: string | null;
  beatAt: string | null;
  /** Milliseconds since its last heartbeat, by the reader's clock. */
  ageMs: number | null;
  intervalMs: number | null;
  stoppedAt: string | null;
  /** Beating (not stopped, fewer than three beats missed). */
  live: boolean;
  /** The actors whose lease it holds, by stream name. */
  owns: OwnedActor[];
}

export interface NodesView {
  /** True on a cluster's log (PostgreSQL, leases); false on SQLite (one supervisor, no leases). */
  cluster: boolean;
  at: string;
  nodes: NodeView[];
  /** Live actors whose lease nobody holds (a cluster's log only). */
  unowned: { id: string; kind: string; state: string }[];
}

const ACTOR = /^(instance|execution)-(.+)$/;

/** Splits an actor's stream name into kind and id (other streams, e.g. an app's, keep their name as the id). */
function actorOf(stream: string): { kind: string; id: string } {
  const m = ACTOR.exec(stream);
  return m ? { kind: m[1]!, id: m[2]! } : { kind: stream.split('-')[0]!, id: stream };
}

export function nodesView(
  records: ClusterRecords,
  now: string,
  actors: { state(stream: string): string | null; live: { stream: string; id: string; kind: string; state: string }[] },
  cluster = true,
): NodesView {
  const views = new Map<string, NodeView>();
  for (const n of records.nodes) {
    views.set(n.node, {
      node: n.node,
      host: n.host,
      pid: n.pid,
      startedAt: n.startedAt,
      beatAt: n.beatAt,
      ageMs: Math.max(0, msBetween(n.beatAt, now)),
      intervalMs: n.intervalMs,
      stoppedAt: n.stoppedAt,
      live: supervision(n, now).supervised,
      owns: [],
    });
  }
  for (const l of records.leases) {
    let v = views.get(l.node);
    if (!v)
      views.set(
        l.node,
        (v = {
          node: l.node,
          host: null,
          pid: null,
          startedAt: null,
          beatAt: null,
          ageMs: null,
          intervalMs: null,
          stoppedAt: null,
          live: false,
          owns: [],
        }),
      );
    v.owns.push({
      ...actorOf(l.stream),
      state: actors.state(l.stream),
      token: l.token,
      expiresAt: l.expiresAt,
      expiresInMs: l.expiresInMs,
      expired: l.expiresInMs <= 0,
    });
  }
  for (const v of views.values()) v.owns.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const leased = new Set(records.leases.map((l) => l.stream));
  return {
    cluster,
    at: now,
    // Live nodes first, then by name.
    nodes: [...views.values()].sort(
      (a, b) => Number(b.live) - Number(a.live) || (a.node < b.node ? -1 : a.node > b.node ? 1 : 0),
    ),
    unowned: cluster
      ? actors.live.filter((a) => !leased.has(a.stream)).map(({ id, kind, state }) => ({ id, kind, state }))
      : [],
  };
}
