// The one stateful part (like XState's Actor): event in → pure transition → durable append → effects.
// Rule 1: an event is on disk before any of its effects starts. Effects report back only by
// dispatching new events, so everything the supervisor learns lands in the log.
import type { AnyStateMachine } from 'xstate';
import { ConcurrencyError, FencedError, NotFoundError, RunlogError } from '../../domain/errors.ts';
import {
  parseStreamName,
  rejectedType,
  streamName,
  toMachineEvent,
  type ActorKind,
  type KindNewEvent,
  type NewEvent,
  type RecordedEvent,
} from '../../domain/events.ts';
import type { Effect, EffectsByKind, KindEffect } from '../../machines/effects.ts';
import { initialSnapshot, isTerminal, replay, stateName, step, type AnySnapshot } from '../../machines/runtime.ts';
import { actorStatus, summarize } from '../../machines/summary.ts';
import type { Reconnecting } from '../../store/capabilities.ts';
import { collect, type ActorRow, type EventStorePort } from '../../store/port.ts';
import type { Bus, TransitionNotice } from './bus.ts';
import { decodeSnapshot, encodeSnapshot, snapshotDue } from '../../inspect/snapshots.ts';
import { EffectRunner } from './effect-runner.ts';
import { noFaults, type FaultHook } from './faults.ts';
import { GroupCommit } from './group-commit.ts';
import { isUnavailable, lookUpAfter, notRecordedError, readBack, sameEvent } from './outage-read-back.ts';

export interface LiveActor {
  id: string;
  kind: ActorKind;
  stream: string;
  snapshot: AnySnapshot;
  version: number;
  createdAt: string;
}

export interface EffectContext<K extends ActorKind = ActorKind> {
  actor: LiveActor;
  /** Dispatches an event to this actor (effects report results this way). */
  dispatch(event: KindNewEvent<K>): Promise<DispatchResult>;
}

export type EffectHandler<P, K extends ActorKind = ActorKind> = (
  params: P,
  ctx: EffectContext<K>,
) => Promise<void> | void;

/**
 * One handler per effect the kind's machine can emit, each typed with that effect's params: a missing or
 * misspelled handler, or one that reads a param the machine does not give, is a compile error.
 */
export type EffectHandlers<K extends ActorKind> = {
  [T in keyof EffectsByKind[K]]: EffectHandler<EffectsByKind[K][T], K>;
};

/** Every kind's handlers (what a supervising host runs). */
export type AllEffectHandlers = { [K in ActorKind]: EffectHandlers<K> };

// Moved to effect-runner.ts with the running of effects; re-exported for the code that imports it from here.
export { UnknownEffectError } from './effect-runner.ts';

export interface DispatchResult {
  accepted: boolean;
  from: string;
  to: string;
  event: RecordedEvent;
  effects: Effect[];
}

export interface ActorHostOptions {
  store: EventStorePort;
  /**
   * A store that can be briefly unreachable (PostgreSQL restarting): an append cut off by it is looked up in the log
   * once it answers again. null: a store that is never unreachable (a file); such an error is passed on as it is.
   */
  reconnecting: Reconnecting | null;
  bus: Bus;
  machines: Record<ActorKind, AnyStateMachine>;
  /**
   * The effect handlers; null = this host records events but runs no effects (a writable log opened without
   * supervising: whatever the events ask for is the supervisor's to do).
   */
  effects: AllEffectHandlers | null;
  now?: () => string;
  faults?: FaultHook;
  /** Turns an effect that threw into an event, so the failure is in the log (not just in a console). */
  onEffectError?: (kind: ActorKind, effect: Effect, error: unknown) => KindNewEvent<ActorKind> | null;
  log?: (msg: string) => void;
  /** Called as an actor is created (tracing): what it returns is merged into the first event's meta. */
  onCreate?: (kind: ActorKind, id: string) => Record<string, unknown> | undefined;
  /** Whether this supervisor owns the actor (a cluster node: its lease). Others' actors are never held or rehydrated. */
  owns?: (stream: string) => boolean;
  /**
   * A request whose append was cut off (STORE_UNAVAILABLE) is looked up in the log once the store answers, for
   * this long (ms, default 10 000): one that committed is answered as done; past it, the error says it may have.
   */
  lookUpMs?: number;
  /**
   * A new actor's first event was found committed after its reply was lost: its lease is this node's, unknown to it
   * (cluster: pick it up).
   */
  onOrphaned?: (stream: string) => void;
}

const LOOK_UP_MS = 10_000;

export class IllegalEventError extends RunlogError {
  constructor(id: string, state: string, type: string) {
    super('ILLEGAL_EVENT', `${id} is ${state}: it cannot take ${type}`, { id, state, type });
  }
}

/** An event of any kind's vocabulary, or one from outside the program (dispatchExternal). */
type AnyNewEvent = NewEvent<string, object>;

/**
 * The log holds any JSON object as an event's data. A typed event's data is an interface (no index
 * signature), so it is widened here, once, on its way to the log and to the machine's untyped step.
 */
const toLogged = (e: AnyNewEvent): NewEvent => ({ ...e, data: e.data as Record<string, unknown> });

export class ActorHost {
  private readonly actors = new Map<string, LiveActor>();
  /**
   * Actors (as this host held them) an append was refused for as FENCED: their effects speak for an owner this
   * node no longer is. Nothing more such an effect reports is appended — not even its failure — should the lease
   * come back to this node later (a pick-up): the actor is then read afresh from the log, and its results are stale.
   */
  private readonly fenced = new WeakMap<LiveActor, FencedError>();
  /** Appends decided in this turn of the event loop, committed together (group-commit.ts). */
  private readonly appends: GroupCommit;
  private readonly queues = new Map<string, Promise<unknown>>();
  /** The effects running, per actor (effect-runner.ts). */
  private readonly effectRunner: EffectRunner;
  private readonly now: () => string;
  private readonly faults: FaultHook;
  private closed = false;

  constructor(private readonly opts: ActorHostOptions) {
    this.now = opts.now ?? (() => new Date().toISOString());
    this.faults = opts.faults ?? noFaults;
    this.appends = new GroupCommit(opts.store);
    this.effectRunner = new EffectRunner({
      effects: opts.effects,
      bus: opts.bus,
      log: opts.log,
      faults: this.faults,
      onEffectError: opts.onEffectError,
      fenced: this.fenced,
      report: (actor, e) => this.enqueue(actor.kind, actor.id, e, true),
      closed: () => this.closed,
    });
  }

  /** Loads every non-terminal actor by replaying its events (the projection says which are live). */
  async rehydrate(): Promise<LiveActor[]> {
    const live: LiveActor[] = [];
    for (const row of await this.opts.store.listActors({ all: false })) {
      if (this.opts.owns && !this.opts.owns(row.stream)) continue;
      const actor = await this.load(row.kind as ActorKind, row.id);
      if (actor && !isTerminal(actor.snapshot)) live.push(actor);
    }
    return live;
  }

  /**
   * A live actor this host holds in memory (a transition is decided from memory); undefined for one it does not
   * hold (ended, another node's, or not read yet): fetch() reads those from the log.
   */
  get(kind: ActorKind, id: string): LiveActor | undefined {
    return this.actors.get(streamName(kind, id));
  }

  /** get(), or else the actor read from the log (a live one this host owns is kept in memory from then on). */
  async fetch(kind: ActorKind, id: string): Promise<LiveActor | undefined> {
    return this.actors.get(streamName(kind, id)) ?? (await this.load(kind, id));
  }

  live(): LiveActor[] {
    return [...this.actors.values()].filter((a) => !isTerminal(a.snapshot));
  }

  /**
   * Reads an actor from the log. Only a live actor is kept in memory: an ended one (whose context may hold an
   * 8 MiB input and a 1 MiB output) is read again when asked, so a supervisor that runs for weeks holds only
   * what is still running.
   */
  private async load(kind: ActorKind, id: string): Promise<LiveActor | undefined> {
    const stream = streamName(kind, id);
    const machine = this.opts.machines[kind];
    // The newest usable snapshot, then only the events after it (snapshots.ts); none usable: the whole stream.
    const cached = await this.opts.store.snapshotAtOrBefore(stream);
    const from = cached ? decodeSnapshot(machine, cached) : null;
    const events = await collect(this.opts.store.readStream(stream, from ? { from: cached!.version + 1 } : {}));
    // Read meanwhile by another caller (or created here): the one in memory is the actor, events wait on it.
    const held = this.actors.get(stream);
    if (held) return held;
    if (events.length === 0 && !from) return undefined;
    const snapshot = replay(machine, events.map(toMachineEvent), from ?? undefined);
    const version = events.length > 0 ? events[events.length - 1]!.version : cached!.version;
    const actor: LiveActor = {
      id,
      kind,
      stream,
      snapshot,
      version,
      createdAt: from ? cached!.createdAt : events[0]!.at,
    };
    if (!isTerminal(snapshot) && (!this.opts.owns || this.opts.owns(stream))) this.actors.set(stream, actor);
    return actor;
  }

  /** Whether the actor is in memory here (live, or being created). */
  holds(stream: string): boolean {
    return this.actors.has(stream);
  }

  /** Drops an actor from memory (its lease went to another supervisor): it is read again if ever asked for. */
  forget(stream: string): void {
    this.actors.delete(stream);
  }

  /** How many actors the host holds in memory (live ones only; see load()). */
  get size(): number {
    return this.actors.size;
  }

  /** Starts a new actor with its first event. Fails if the id is taken. */
  async create<K extends ActorKind>(kind: K, id: string, first: KindNewEvent<K>): Promise<DispatchResult> {
    const stream = streamName(kind, id);
    // Looked at again after the read: another create of the same id may have come in meanwhile.
    if (this.actors.has(stream) || (await this.opts.store.streamVersion(stream)) > 0 || this.actors.has(stream)) {
      throw new RunlogError('ACTOR_EXISTS', `${kind} ${id} already exists`, { kind, id });
    }
    const at = first.at ?? this.now();
    const placeholder: LiveActor = {
      id,
      kind,
      stream,
      snapshot: initialSnapshot(this.opts.machines[kind]),
      version: 0,
      createdAt: at,
    };
    this.actors.set(stream, placeholder);
    const meta = this.opts.onCreate?.(kind, id);
    try {
      return await this.enqueue(kind, id, { ...first, at, ...(meta ? { meta: { ...first.meta, ...meta } } : {}) });
    } catch (err) {
      // Nothing was appended (an event that cannot be encoded, a closed host): the actor never existed.
      if (this.actors.get(stream) === placeholder && placeholder.version === 0) this.actors.delete(stream);
      throw err;
    }
  }

  /** Events for one actor are applied one at a time, in arrival order. */
  dispatch<K extends ActorKind>(kind: K, id: string, event: KindNewEvent<K>): Promise<DispatchResult> {
    return this.enqueue(kind, id, event);
  }

  /**
   * A fact the supervisor observed (an effect's result, a process that exited, a timer that came due): unlike a
   * request, it must be recorded even when the store is briefly unreachable (PostgreSQL restarting). Its append
   * waits for the store to answer again, and one that was cut off is checked for having landed before it is
   * sent again — so the fact is recorded once, and the actor's later events wait behind it.
   */
  dispatchObserved<K extends ActorKind>(kind: K, id: string, event: KindNewEvent<K>): Promise<DispatchResult> {
    return this.enqueue(kind, id, event, true);
  }

  /**
   * An event from outside the program (the public `send`, an API caller): its type is not known to be one of
   * the machine's, so the machine decides; one it cannot take is recorded as rejected.
   */
  dispatchExternal(kind: ActorKind, id: string, event: NewEvent): Promise<DispatchResult> {
    return this.enqueue(kind, id, event);
  }

  private enqueue(kind: ActorKind, id: string, event: AnyNewEvent, observed = false): Promise<DispatchResult> {
    const stream = streamName(kind, id);
    const prev = this.queues.get(stream) ?? Promise.resolve();
    const next = prev.catch(() => undefined).then(() => this.apply(kind, id, event, 0, observed));
    this.queues.set(stream, next);
    void next
      .finally(() => {
        if (this.queues.get(stream) === next) this.queues.delete(stream);
      })
      .catch(() => undefined);
    return next;
  }

  private async apply(
    kind: ActorKind,
    id: string,
    input: AnyNewEvent,
    attempt = 0,
    observed = false,
  ): Promise<DispatchResult> {
    if (this.closed) throw new RunlogError('HOST_CLOSED', 'the supervisor is shutting down');
    // Not in memory (ended, or not yet read): its history is read from the log first. A live actor in memory
    // takes no extra turn here, so the appends of one turn still share a commit.
    const actor = this.actors.get(streamName(kind, id)) ?? (await this.load(kind, id));
    if (!actor) throw new NotFoundError(kind, id);
    if (this.closed) throw new RunlogError('HOST_CLOSED', 'the supervisor is shutting down');
    const event: NewEvent = { ...toLogged(input), at: input.at ?? this.now() };
    const machine = this.opts.machines[kind];
    const from = stateName(actor.snapshot);
    const r = step(machine, actor.snapshot, { type: event.type, at: event.at!, data: event.data });

    const toAppend: NewEvent = r.accepted
      ? event
      : {
          type: rejectedType(kind),
          at: event.at,
          data: { rejected: { type: event.type, data: event.data }, state: from },
          meta: event.meta,
        };
    const nextSnapshot = r.snapshot;
    const to = stateName(nextSnapshot);

    this.faults('before-append', { eventType: event.type });
    let recorded: RecordedEvent;
    try {
      const result = await this.appends.commit({
        stream: actor.stream,
        events: [toAppend],
        expectedVersion: actor.version === 0 ? 'no-stream' : actor.version,
        row: this.row(actor, nextSnapshot, actor.version + 1, event.at!),
        ...(snapshotDue(nextSnapshot, actor.version + 1)
          ? { snapshot: encodeSnapshot(machine, actor.stream, actor.version + 1, actor.createdAt, nextSnapshot) }
          : {}),
      });
      recorded = result.events[0]!;
    } catch (err) {
      // Another supervisor owns it now (this one's lease ran out): let go of it, act on it no more.
      if (err instanceof FencedError) {
        this.forget(actor.stream);
        this.fenced.set(actor, err);
      }
      if (err instanceof ConcurrencyError && attempt < 3) {
        // Someone else appended to this stream (another process): re-read and re-decide.
        this.actors.delete(actor.stream);
        return this.apply(kind, id, input, attempt + 1, observed);
      }
      const reconnecting = this.opts.reconnecting;
      if (!reconnecting || !isUnavailable(err) || this.closed) throw err;
      if (!observed)
        return this.lookUp(
          actor,
          toAppend,
          { from, to, accepted: r.accepted, effects: r.effects, nextSnapshot },
          err as RunlogError,
          reconnecting,
        );
      // An observed fact and an unreachable store: wait for it (its reads caught up), then see whether the cut-off
      // append committed after all; if not, decide again (same time stamp) and append.
      const landed = await readBack(this.opts.store, actor.stream, actor.version + 1, reconnecting);
      if (landed.length !== 1 || !sameEvent(landed[0]!, toAppend))
        return this.apply(kind, id, { ...input, at: event.at }, 0, observed);
      recorded = landed[0]!;
    }
    actor.snapshot = nextSnapshot;
    actor.version = recorded.version;
    this.told(actor, { id, kind, from, to, event: recorded, accepted: r.accepted });
    this.faults('after-append', { eventType: event.type });

    const result: DispatchResult = { accepted: r.accepted, from, to, event: recorded, effects: r.effects };
    if (r.effects.length > 0) this.effectRunner.run(actor, r.effects);
    return result;
  }

  /**
   * A request (not an observed fact: it is not sent again) whose append was cut off: looked up in the log once the
   * store answers, within the lookup budget. Committed: answered as done. A new actor's first event that committed
   * also took its lease, which this node never heard of: the actor leaves memory here and the cluster picks it up
   * from the log (lease-pickup.ts), as start-up would; an existing actor goes on here. Not committed: the request
   * failed, nothing of it is in the log. No answer in time: STORE_UNAVAILABLE, saying it may have committed.
   */
  private async lookUp(
    actor: LiveActor,
    sent: NewEvent,
    decided: { from: string; to: string; accepted: boolean; effects: Effect[]; nextSnapshot: AnySnapshot },
    err: RunlogError,
    reconnecting: Reconnecting,
  ): Promise<DispatchResult> {
    const until = Date.now() + (this.opts.lookUpMs ?? LOOK_UP_MS);
    // Looked up within the budget: a read cut off again (the store went away once more) waits again while time is
    // left; any other failure to read leaves it unknown.
    const landed = await lookUpAfter(this.opts.store, actor.stream, actor.version + 1, reconnecting, until);
    const answered = landed !== null;
    const recorded = landed?.length === 1 && sameEvent(landed[0]!, sent) ? landed[0]! : null;
    if (!recorded) {
      // A new actor's first event is not in the log (or not known to be): the id is free again here.
      if (actor.version === 0 && this.actors.get(actor.stream) === actor && (landed?.length ?? 0) === 0)
        this.actors.delete(actor.stream);
      throw notRecordedError(err, actor, sent, answered);
    }
    const { id, kind } = actor;
    if (actor.version === 0 && this.opts.onOrphaned) {
      // Its lease was taken in that transaction: the node holds it without knowing; it rehydrates it from the log.
      if (this.actors.get(actor.stream) === actor) this.actors.delete(actor.stream);
      this.opts.bus.emit('actor:transition', {
        id,
        kind,
        from: decided.from,
        to: decided.to,
        event: recorded,
        accepted: decided.accepted,
      });
      this.opts.onOrphaned?.(actor.stream);
      return { accepted: decided.accepted, from: decided.from, to: decided.to, event: recorded, effects: [] };
    }
    actor.snapshot = decided.nextSnapshot;
    actor.version = recorded.version;
    this.told(actor, { id, kind, from: decided.from, to: decided.to, event: recorded, accepted: decided.accepted });
    if (decided.effects.length > 0) this.effectRunner.run(actor, decided.effects);
    return {
      accepted: decided.accepted,
      from: decided.from,
      to: decided.to,
      event: recorded,
      effects: decided.effects,
    };
  }

  /**
   * Tells the bus about a transition the log now holds. An ended actor leaves memory once it is told (a listener may
   * look at its context with get()); its running effects (cleanup, announce) keep their own reference.
   */
  private told(actor: LiveActor, notice: TransitionNotice): void {
    try {
      this.opts.bus.emit('actor:transition', notice);
    } finally {
      if (isTerminal(actor.snapshot) && this.actors.get(actor.stream) === actor) this.actors.delete(actor.stream);
    }
  }

  private row(actor: LiveActor, snapshot: AnySnapshot, version: number, at: string): ActorRow {
    return {
      id: actor.id,
      kind: actor.kind,
      stream: actor.stream,
      state: stateName(snapshot),
      status: actorStatus(snapshot),
      version,
      createdAt: actor.createdAt,
      updatedAt: at,
      summary: summarize(actor.kind, snapshot),
    };
  }

  /** The fault-injection hook this host was given (recovery code reports its own points through it). */
  get faultHook(): FaultHook {
    return this.faults;
  }

  /** Whether this actor has an effect running or an event queued (recovery leaves such actors alone). */
  busy(kind: ActorKind, id: string): boolean {
    const stream = streamName(kind, id);
    return this.effectRunner.busy(stream) || this.queues.has(stream);
  }

  /**
   * Appends facts to a stream that is not an actor (e.g. the reconciler's findings about containers and
   * volumes no actor owns). No machine, no effects: the log records what was observed and done.
   */
  async appendFact(stream: string, events: NewEvent[]): Promise<RecordedEvent[]> {
    if (this.closed) throw new RunlogError('HOST_CLOSED', 'the supervisor is shutting down');
    if (parseStreamName(stream))
      throw new RunlogError('NOT_A_FACT_STREAM', `${stream} is an actor's stream: send it events through its machine`);
    const at = this.now();
    return (
      await this.opts.store.appendToStream(
        stream,
        events.map((e) => ({ ...e, at: e.at ?? at })),
        { expectedVersion: 'any' },
      )
    ).events;
  }

  /** Resolves when this actor has no effect running and no event queued. */
  async settled(kind: ActorKind, id: string): Promise<void> {
    const stream = streamName(kind, id);
    for (;;) {
      const waiting = [
        ...this.effectRunner.runningFor(stream),
        ...(this.queues.has(stream) ? [this.queues.get(stream)!] : []),
      ];
      if (waiting.length === 0) return;
      await Promise.allSettled(waiting);
    }
  }

  /** Resolves when no effect is running and no event is queued (tests, graceful shutdown). */
  async idle(): Promise<void> {
    while (this.effectRunner.size > 0 || this.queues.size > 0) {
      await Promise.allSettled([...this.effectRunner.all(), ...this.queues.values()]);
    }
  }

  /** Runs effects again for a rehydrated actor (e.g. a timer that was armed before a restart). */
  resumeEffects(actor: LiveActor, effects: readonly KindEffect<ActorKind>[]): void {
    if (effects.length > 0) this.effectRunner.run(actor, effects);
  }

  close(): void {
    this.closed = true;
  }

  static idFromStream(stream: string): { kind: ActorKind; id: string } | null {
    return parseStreamName(stream);
  }
}
