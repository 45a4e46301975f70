// The supervisor's heartbeat: written into the log's own database every interval while it supervises, and
// marked stopped on a clean close, so `ps`/`inspect` (reading the file, maybe in another process) can tell a
// current state from a last known one.
import { hostname } from 'node:os';
import type { EventStorePort } from '../../store/port.ts';

export const DEFAULT_HEARTBEAT_MS = 5000;

export interface HeartbeatHandle {
  readonly intervalMs: number;
  /** The time of the last beat written (metrics: heartbeat age). */
  lastBeat(): string;
  /** Stops beating and writes the stop mark (clean shutdown); resolves once it is written (or failed). */
  stop(): Promise<void>;
}

export function startHeartbeat(
  store: Pick<EventStorePort, 'writeHeartbeat'>,
  now: () => string,
  intervalMs = DEFAULT_HEARTBEAT_MS,
  log?: (m: string) => void,
  node = hostname(),
): HeartbeatHandle {
  const startedAt = now();
  const base = { node, pid: process.pid, startedAt, intervalMs };
  let last = startedAt;
  let failing = false;
  // One write at a time: a beat still on its way (a slow database) is not overtaken by the next, nor by the stop mark.
  let writing: Promise<void> | null = null;
  const beat = async (stoppedAt: string | null = null): Promise<void> => {
    const at = now();
    try {
      await store.writeHeartbeat({ ...base, beatAt: at, stoppedAt });
      last = at;
      failing = false;
    } catch (err) {
      // A busy or full disk must not take the supervisor down; ps will say "unsupervised", which is honest.
      if (!failing) log?.(`could not record the heartbeat: ${(err as Error).message}`);
      failing = true;
    }
  };
  const tick = (): void => {
    if (writing) return; // the previous beat is still being written: this one would say nothing newer
    writing = beat().finally(() => (writing = null));
  };
  tick();
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return {
    intervalMs,
    lastBeat: () => last,
    async stop() {
      clearInterval(timer);
      await writing;
      await beat(now());
    },
  };
}
