// The Docker Engine as seen from the supervisor: a subscription to its events (containers labelled with this
// runlog home) that survives the daemon restarting or being briefly unreachable. When the event stream ends the
// watcher retries with backoff; once the Engine answers again it re-subscribes and reconciles, so whatever
// happened while it was away (containers stopped by the daemon's shutdown, removed, started) lands in the log.
//
// A `die` of a container whose instance the log says is up, and that no runner of this process still watches,
// becomes `instance.crashed` with the exit code Docker reports (the runner's own exit watcher normally reports
// first; this is the safety net for a watcher broken by the daemon going away).
import type { DockerEngine, EngineEvent, EngineEventSubscription } from '../../adapters/docker/docker-port.ts';
import { createDockerEngine } from '../../adapters/docker/dockerode-engine.ts';
import { parseStreamName } from '../../domain/events.ts';
import type { InstanceContext } from '../../machines/instance.machine.ts';
import { stateName } from '../../machines/runtime.ts';
import type { ActorHost } from '../host/actor-host.ts';
import type { ReconcileReport } from './reconcile-run.ts';

export interface EngineWatchOptions {
  socketPath: string;
  /** The Engine port to watch through (default: one on socketPath). */
  engine?: DockerEngine;
  home: string;
  host: () => ActorHost;
  /** Run after every reconnection (not after the first connection: the start already reconciled). */
  reconcile: () => Promise<ReconcileReport>;
  /**
   * Whether a runner of this process still watches the instance's exit itself. Without it `die` events are not
   * turned into crashes (a late report from the runner could otherwise hit the instance's next incarnation).
   */
  tracks?: (instanceId: string) => boolean;
  log?: (msg: string) => void;
  /** Backoff between attempts while the Engine does not answer. */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** How long a `die` waits for the runner's own report before the watcher records it. */
  dieGraceMs?: number;
  /** Told about connections and reconciliations (tests, the inspector). */
  onStatus?: (s: EngineWatchStatus) => void;
}

export type EngineWatchStatus =
  | { type: 'connected'; reconnect: boolean }
  | { type: 'disconnected'; reason: string }
  | { type: 'reconciled'; report: ReconcileReport }
  | { type: 'reconcile-failed'; error: string }
  | { type: 'crash-recorded'; instanceId: string; containerId: string; exitCode: number | null };

export interface EngineWatch {
  readonly connected: boolean;
  /** Times the subscription was (re)established. */
  readonly connections: number;
  /** Resolves once connected (at once when connected now). */
  whenConnected(): Promise<void>;
  close(): Promise<void>;
}

const UP_STATES = new Set(['running', 'adopted', 'paused']);

export function startEngineWatch(o: EngineWatchOptions): EngineWatch {
  const log = o.log ?? (() => undefined);
  const engine = o.engine ?? createDockerEngine({ socketPath: o.socketPath });
  const minMs = o.retryMinMs ?? 250;
  const maxMs = o.retryMaxMs ?? 5000;
  let closed = false;
  let connected = false;
  let connections = 0;
  let sub: EngineEventSubscription | null = null;
  let lastEventSec: number | undefined;
  let wake: (() => void) | null = null;
  const waiters: (() => void)[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const status = (s: EngineWatchStatus) => {
    try {
      o.onStatus?.(s);
    } catch {
      /* a listener's bug is not the watcher's */
    }
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        timers.delete(t);
        wake = null;
        resolve();
      }, ms);
      timers.add(t);
      wake = () => {
        clearTimeout(t);
        timers.delete(t);
        wake = null;
        resolve();
      };
    });

  const onEvent = (e: EngineEvent) => {
    if (e.time) lastEventSec = e.time;
    if (e.type !== 'container' || e.action !== 'die') return;
    const ref = parseStreamName(e.attributes['runlog.stream'] ?? '');
    if (!ref || ref.kind !== 'instance' || e.attributes['runlog.kind'] !== 'instance') return;
    const t = setTimeout(() => {
      timers.delete(t);
      void onDie(ref.id, e).catch((err: unknown) => log(`engine watch: die of ${e.id.slice(0, 12)}: ${String(err)}`));
    }, o.dieGraceMs ?? 2000);
    timers.add(t);
  };

  const onDie = async (instanceId: string, e: EngineEvent) => {
    if (closed) return;
    const host = o.host();
    const actor = await host.fetch('instance', instanceId);
    if (!actor) return;
    const c = actor.snapshot.context as InstanceContext;
    if (!UP_STATES.has(stateName(actor.snapshot)) || c.containerId !== e.id) return; // already known, or another incarnation
    if (!o.tracks || o.tracks(instanceId)) return; // its runner watches it and will report the exit itself
    const evidence = { containerId: e.id, exitCode: e.exitCode, source: 'engine-events', time: e.time };
    const r = await host.dispatch('instance', instanceId, {
      type: 'instance.crashed',
      data: {
        reason: 'exit',
        exitCode: e.exitCode,
        signal: null,
        message: `its container died (code ${e.exitCode}, seen in the Engine's events)`,
        evidence,
      },
      meta: { source: 'engine-watch' },
    });
    if (r.accepted) status({ type: 'crash-recorded', instanceId, containerId: e.id, exitCode: e.exitCode });
  };

  const reconcile = async () => {
    try {
      const report = await o.reconcile();
      if (report.actions.length > 0)
        log(`engine watch: reconciled after reconnecting (${report.actions.length} actions)`);
      status({ type: 'reconciled', report });
    } catch (err) {
      log(`engine watch: reconcile after reconnecting failed: ${String(err)}`);
      status({ type: 'reconcile-failed', error: String(err) });
    }
  };

  const loop = async () => {
    let delay = minMs;
    let wasDown = false;
    while (!closed) {
      try {
        sub = await engine.subscribeEvents(
          { labels: { 'runlog.home': o.home }, ...(lastEventSec !== undefined ? { sinceSec: lastEventSec } : {}) },
          onEvent,
        );
      } catch (err) {
        if (!wasDown) log(`engine watch: the Docker Engine does not answer (${(err as Error).message}); retrying`);
        wasDown = true;
        await sleep(delay);
        delay = Math.min(maxMs, delay * 2);
        continue;
      }
      if (closed) {
        sub.close();
        break;
      }
      const reconnect = connections > 0 || wasDown;
      connections += 1;
      connected = true;
      delay = minMs;
      if (reconnect) log('engine watch: reconnected to the Docker Engine');
      status({ type: 'connected', reconnect });
      for (const w of waiters.splice(0)) w();
      if (reconnect) await reconcile();
      const ended = await sub.ended;
      sub = null;
      connected = false;
      if (closed) break;
      wasDown = true;
      log(`engine watch: lost the Docker Engine's event stream (${ended?.message ?? 'closed'}); reconnecting`);
      status({ type: 'disconnected', reason: ended?.message ?? 'closed' });
      await sleep(delay);
    }
  };
  const running = loop().catch((err: unknown) => log(`engine watch stopped: ${String(err)}`));

  return {
    get connected() {
      return connected;
    },
    get connections() {
      return connections;
    },
    whenConnected() {
      return connected ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve));
    },
    async close() {
      closed = true;
      sub?.close();
      wake?.();
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await running;
      for (const w of waiters.splice(0)) w();
    },
  };
}
