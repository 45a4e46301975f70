// The supervisor's heartbeat: written into the log's own database every interval while it supervises, and
// marked stopped on a clean close, so `ps`/`inspect` (reading the file, maybe in another process) can tell a
// current state from a last known one.
import { hostname } from 'node:os';
import type { HostStore } from '../../store/host-store.ts';

export const DEFAULT_HEARTBEAT_MS = 5000;

export interface HeartbeatHandle {
  readonly intervalMs: number;
  /** The time of the last beat written (metrics: heartbeat age). */
  lastBeat(): string;
  /** Writes the stop mark (clean shutdown) and stops beating. */
  stop(): void;
}

export function startHeartbeat(store: Pick<HostStore, 'writeHeartbeat'>, now: () => string, intervalMs = DEFAULT_HEARTBEAT_MS, log?: (m: string) => void, node = hostname()): HeartbeatHandle {
  const startedAt = now();
  const base = { node, pid: process.pid, startedAt, intervalMs };
  let last = startedAt;
  let failing = false;
  const beat = (stoppedAt: string | null = null) => {
    const at = now();
    try {
      store.writeHeartbeat({ ...base, beatAt: at, stoppedAt });
      last = at;
      failing = false;
    } catch (err) {
      // A busy or full disk must not take the supervisor down; ps will say "unsupervised", which is honest.
      if (!failing) log?.(`could not record the heartbeat: ${(err as Error).message}`);
      failing = true;
    }
  };
  beat();
  const timer = setInterval(() => beat(), intervalMs);
  timer.unref();
  return {
    intervalMs,
    lastBeat: () => last,
    stop() {
      clearInterval(timer);
      beat(now());
    },
  };
}
