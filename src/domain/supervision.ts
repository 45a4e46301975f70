// Whether anything supervises a log right now, from its last heartbeat. Pure: the caller passes the time.
// A supervisor beats every `intervalMs`; missing three beats means it is gone (the way a kubelet's node goes
// NotReady), and what `ps` shows is then the last known state, not the current one.
import { msBetween } from './time.ts';

export interface HeartbeatRecord {
  node: string;
  pid: number;
  startedAt: string;
  beatAt: string;
  intervalMs: number;
  stoppedAt: string | null;
}

export interface Supervision {
  supervised: boolean;
  /** The last heartbeat (null: no supervisor ever ran on this log). */
  heartbeatAt: string | null;
  /** Unsupervised since: a clean stop's time, else the last heartbeat. Null while supervised or never supervised. */
  since: string | null;
  node: string | null;
  pid: number | null;
}

/** How many missed intervals make a supervisor count as gone. */
export const MISSED_BEATS = 3;

export function supervision(hb: HeartbeatRecord | null, now: string): Supervision {
  if (!hb) return { supervised: false, heartbeatAt: null, since: null, node: null, pid: null };
  const stale = msBetween(hb.beatAt, now) > hb.intervalMs * MISSED_BEATS;
  const supervised = hb.stoppedAt === null && !stale;
  return {
    supervised,
    heartbeatAt: hb.beatAt,
    since: supervised ? null : (hb.stoppedAt ?? hb.beatAt),
    node: hb.node,
    pid: hb.pid,
  };
}
