// The library entry point. `createRunlog()` opens the log; with `supervise` (the default) it also
// rehydrates every live actor and runs effects, i.e. it is the supervisor. Inspection works either way.
import { RunlogError } from '../domain/errors.ts';
import type { ActorKind, NewEvent, RecordedEvent } from '../domain/events.ts';
import type { Effect } from '../machines/effects.ts';
import { machines } from '../machines/replay.ts';
import type { ActorRow } from '../store/event-store.ts';
import { SqliteEventStore } from '../store/sqlite-event-store.ts';
import { ActorHost, type EffectHandlers } from './actor-host.ts';
import { createBus, type Bus, type BusEvents } from './bus.ts';
import { noFaults, type FaultHook } from './faults.ts';
import {
  actorEvents,
  inspectActor,
  listActors,
  rebuildProjection,
  replayActor,
  type ActorView,
  type ReplayView,
} from './inspection.ts';
import { resolvePaths } from './paths.ts';
import { RestartTimers } from './timers.ts';

export interface RunlogOptions {
  /** Runlog's directory (default $RUNLOG_HOME, else ~/.runlog). */
  home?: string;
  /** The event log file (default <home>/runlog.db). */
  db?: string;
  /** Rehydrate live actors and run effects (default true). false = read-only inspection. */
  supervise?: boolean;
  synchronous?: 'FULL' | 'NORMAL';
  now?: () => string;
  faults?: FaultHook;
  /** Effect handlers by kind, merged over the built-in ones (tests inject fakes here). */
  effects?: Partial<Record<ActorKind, EffectHandlers>>;
  log?: (msg: string) => void;
}

export interface SpawnAppOptions {
  /** An app directory holding runlog.json (it is registered into the workspace under its appId). */
  appDir: string;
  /** Overrides the manifest's sandbox. */
  sandbox?: 'proot' | 'container';
  instanceId?: string;
}

export interface ExecuteOptions {
  /** at:// URI of a dev.mainasara.at-run.beta.v2.code record, or of an alias pointing at one. */
  uri: string;
  handler: string;
  input?: unknown;
  callerDid?: string;
  timeoutMs?: number;
  /** Progress during resolution, pulls and extraction (also recorded as execution.step events). */
  onProgress?: (step: { name: string; detail: Record<string, unknown> }) => void;
}

export interface ExecutionOutcome {
  executionId: string;
  status: 'succeeded' | 'failed';
  output?: unknown;
  failure?: { reason: string; code: string; message: string };
  view: ActorView;
}

export interface LogLine {
  stream: 'stdout' | 'stderr';
  line: string;
  at: string;
}

export interface Runlog {
  readonly home: string;
  readonly dbPath: string;
  readonly store: SqliteEventStore;
  readonly host: ActorHost;
  readonly bus: Bus;
  list(filter?: { kind?: ActorKind; all?: boolean }): ActorRow[];
  inspect(id: string): ActorView;
  events(id: string, range?: { from?: number; to?: number }): RecordedEvent[];
  replay(id: string, options?: { to?: number }): ReplayView;
  /** Rebuilds the actors projection from the log. */
  rebuild(): { actors: number; events: number };
  on<K extends keyof BusEvents>(event: K, cb: BusEvents[K]): () => void;
  /** Sends an event to an actor through its machine (advanced; the typed calls below use it). */
  send(kind: ActorKind, id: string, event: NewEvent): ReturnType<ActorHost['dispatch']>;
  /** Spawns an app instance; resolves once it is running (or rejects with the reason it is not). */
  spawnApp(options: SpawnAppOptions): Promise<ActorView>;
  /** Graceful stop (onStop hook, SIGTERM, SIGKILL after the grace period); resolves when stopped. */
  stop(id: string, options?: { graceMs?: number }): Promise<ActorView>;
  /** Immediate SIGKILL; resolves when stopped. */
  kill(id: string): Promise<ActorView>;
  /** Adds a tool to an instance's allowlist (manifest rewritten, tools re-provisioned, no respawn). */
  grant(id: string, tool: string): Promise<ActorView>;
  revoke(id: string, tool: string): Promise<ActorView>;
  /** Output lines of an instance (buffered; with follow, live until it exits). */
  logs(id: string, options?: { follow?: boolean }): AsyncIterable<LogLine>;
  /** Runs one at-run execution to its end. */
  execute(options: ExecuteOptions): Promise<ExecutionOutcome>;
  /** Waits until no effect is running (tests and graceful shutdown). */
  idle(): Promise<void>;
  close(): Promise<void>;
}

export async function createRunlog(options: RunlogOptions = {}): Promise<Runlog> {
  const paths = resolvePaths(options);
  const store = new SqliteEventStore(paths.db, { synchronous: options.synchronous, ...(options.now ? { now: options.now } : {}) });
  const bus = createBus();
  const supervise = options.supervise ?? true;
  // eslint-disable-next-line prefer-const
  let host: ActorHost;
  const timers = new RestartTimers(() => host);
  const builtIn: Record<ActorKind, EffectHandlers> = {
    instance: { ...timers.handlers(), announce: announceOn(bus) },
    execution: { announce: announceOn(bus) },
  };
  const effects: Record<ActorKind, EffectHandlers> = supervise
    ? { instance: { ...builtIn.instance, ...options.effects?.instance }, execution: { ...builtIn.execution, ...options.effects?.execution } }
    : { instance: {}, execution: {} };
  host = new ActorHost({
    store,
    bus,
    machines,
    effects,
    ...(options.now ? { now: options.now } : {}),
    faults: options.faults ?? noFaults,
    onEffectError,
    ...(options.log ? { log: options.log } : {}),
  });

  if (supervise) {
    for (const actor of host.rehydrate()) timers.resume(actor);
  }

  return {
    home: paths.home,
    dbPath: paths.db,
    store,
    host,
    bus,
    list: (filter) => listActors(store, filter),
    inspect: (id) => inspectActor(store, id),
    events: (id, range) => actorEvents(store, id, range),
    replay: (id, o) => replayActor(store, id, o?.to),
    rebuild: () => rebuildProjection(store),
    on: (event, cb) => bus.on(event, cb),
    send: (kind, id, event) => host.dispatch(kind, id, event),
    spawnApp: () => Promise.reject(notYet('spawnApp')),
    stop: () => Promise.reject(notYet('stop')),
    kill: () => Promise.reject(notYet('kill')),
    grant: () => Promise.reject(notYet('grant')),
    revoke: () => Promise.reject(notYet('revoke')),
    logs: () => {
      throw notYet('logs');
    },
    execute: () => Promise.reject(notYet('execute')),
    idle: () => host.idle(),
    async close() {
      host.close();
      timers.close();
      await host.idle().catch(() => undefined);
      store.close();
    },
  };
}

const notYet = (what: string) => new RunlogError('NOT_IMPLEMENTED', `${what} is not wired into this build yet`);

function announceOn(bus: Bus) {
  return (params: Record<string, unknown>): void => {
    const { topic, ...payload } = params;
    if (topic === 'app:crashed') bus.emit('app:crashed', payload as never);
    else if (topic === 'execution:finished') bus.emit('execution:finished', payload as never);
  };
}

/** An effect that threw becomes a fact in the actor's log. */
function onEffectError(kind: ActorKind, effect: Effect, error: unknown): NewEvent {
  const message = error instanceof Error ? error.message : String(error);
  const code = typeof error === 'object' && error && 'code' in error ? String((error as { code: unknown }).code) : 'EFFECT_FAILED';
  if (kind === 'instance') {
    return { type: 'instance.crashed', data: { reason: 'effect-failed', effect: effect.type, code, message } };
  }
  return { type: 'execution.failed', data: { reason: 'runtime', effect: effect.type, code, message } };
}
