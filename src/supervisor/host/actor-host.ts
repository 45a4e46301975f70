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
import {
  collect,
  type ActorRow,
  type AppendToStreamResult,
  type EventStorePort,
  type StreamAppend,
  type StreamAppendOutcome,
} from '../../store/port.ts';
import type { Bus, TransitionNotice } from './bus.ts';
import { decodeSnapshot, encodeSnapshot, snapshotDue } from '../../inspect/snapshots.ts';
import { noFaults, type FaultHook } from './faults.ts';

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

/** A handler as the host calls it: the effect came from the machine whose map typed the handler. */
type AnyEffectHandler = (params: unknown, ctx: EffectContext) => Promise<void> | void;

export class UnknownEffectError extends RunlogError {
  constructor(kind: ActorKind, type: string) {
    super('UNKNOWN_EFFECT', `the ${kind} machine emitted ${type}, which has no handler`, { kind, type });
  }
}

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
  /** A new actor's first event was found committed after its reply was lost: its lease is this node's, unknown to it (cluster: pick it up). */
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

interface PendingAppend {
  request: StreamAppend;
  resolve: (result: AppendToStreamResult) => void;
  reject: (error: unknown) => void;
}

export class ActorHost {
  private readonly actors = new Map<string, LiveActor>();
  /**
   * Actors (as this host held them) an append was refused for as FENCED: their effects speak for an owner this
   * node no longer is. Nothing more such an effect reports is appended — not even its failure — should the lease
   * come back to this node later (a pick-up): the actor is then read afresh from the log, and its results are stale.
   */
  private readonly fenced = new WeakMap<LiveActor, FencedError>();
  /** Appends decided in this turn of the event loop, committed together (see commit()). */
  private batch: PendingAppend[] = [];
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly pendingByStream = new Map<string, Set<Promise<unknown>>>();
  private readonly now: () => string;
  private readonly faults: FaultHook;
  private closed = false;

  constructor(private readonly opts: ActorHostOptions) {
    this.now = opts.now ?? (() => new Date().toISOString());
    this.faults = opts.faults ?? noFaults;
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
      const result = await this.commit({
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
      const landed = await this.readBack(actor.stream, actor.version + 1, reconnecting);
      if (landed.length !== 1 || !sameEvent(landed[0]!, toAppend))
        return this.apply(kind, id, { ...input, at: event.at }, 0, observed);
      recorded = landed[0]!;
    }
    actor.snapshot = nextSnapshot;
    actor.version = recorded.version;
    this.told(actor, { id, kind, from, to, event: recorded, accepted: r.accepted });
    this.faults('after-append', { eventType: event.type });

    const result: DispatchResult = { accepted: r.accepted, from, to, event: recorded, effects: r.effects };
    if (r.effects.length > 0) this.track(this.runEffects(actor, r.effects), actor.stream);
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
    let landed: RecordedEvent[] | null = null;
    // Looked up within the budget: a read cut off again (the store went away once more) waits again while time is
    // left; any other failure to read leaves it unknown.
    while (await reconnecting.whenAvailable(Math.max(0, until - Date.now())).catch(() => false)) {
      try {
        landed = await this.readAfter(actor.stream, actor.version + 1);
      } catch {
        break;
      }
      if (landed !== null || Date.now() >= until) break;
    }
    const answered = landed !== null;
    const recorded = landed?.length === 1 && sameEvent(landed[0]!, sent) ? landed[0]! : null;
    if (!recorded) {
      // A new actor's first event is not in the log (or not known to be): the id is free again here.
      if (actor.version === 0 && this.actors.get(actor.stream) === actor && (landed?.length ?? 0) === 0)
        this.actors.delete(actor.stream);
      const ref = `${actor.kind} ${actor.id}`;
      throw new RunlogError(
        'STORE_UNAVAILABLE',
        answered
          ? `${err.message} — looked up once it answered: this request for ${ref} was not recorded (nothing of it is in the log); send it again`
          : `${err.message} — this request for ${ref} may have committed: \`runlog events ${actor.id}\` says whether (its ${sent.type} event is there or not)`,
        { ...err.details, stream: actor.stream, committed: answered ? false : 'unknown' },
        { cause: err },
      );
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
    if (decided.effects.length > 0) this.track(this.runEffects(actor, decided.effects), actor.stream);
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

  /**
   * Group commit: every append decided in the same turn of the event loop (events of different actors: one
   * actor's events wait for each other) goes to disk in one transaction, so N actors reporting at once cost
   * one fsync, not N. Rule 1 holds per event: the promise resolves once the transaction is durable, and only
   * then do its effects start. A version conflict fails only its own append.
   */
  private commit(request: StreamAppend): Promise<AppendToStreamResult> {
    return new Promise((resolve, reject) => {
      this.batch.push({ request, resolve, reject });
      if (this.batch.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.batch;
    this.batch = [];
    const settle = (outcomes: StreamAppendOutcome[]): void =>
      outcomes.forEach((o, i) => (o.ok ? batch[i]!.resolve(o.result) : batch[i]!.reject(o.error)));
    let outcomes: Promise<StreamAppendOutcome[]>;
    try {
      outcomes = this.opts.store.appendMany(batch.map((b) => b.request));
    } catch (err) {
      for (const b of batch) b.reject(err);
      return;
    }
    // The next batch may be sent before this one answers (a store across a network): the store orders them.
    outcomes.then(settle, (err: unknown) => batch.forEach((b) => b.reject(err)));
  }

  /**
   * The stream's events from `from` on, read once the store answers again (an observed fact's cut-off append):
   * a read cut off again waits for the store again. Rejects when the store is closed.
   */
  private async readBack(stream: string, from: number, reconnecting: Reconnecting): Promise<RecordedEvent[]> {
    for (;;) {
      await reconnecting.whenAvailable();
      const landed = await this.readAfter(stream, from);
      if (landed !== null) return landed;
    }
  }

  /** The stream's events from `from` on; null when the store was unreachable for the read. */
  private async readAfter(stream: string, from: number): Promise<RecordedEvent[] | null> {
    try {
      return await collect(this.opts.store.readStream(stream, { from }));
    } catch (err) {
      if (isUnavailable(err)) return null;
      throw err;
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

  private async runEffects(actor: LiveActor, effects: readonly Effect[]): Promise<void> {
    const handlers = this.opts.effects;
    if (!handlers) return; // a host that runs no effects (see ActorHostOptions.effects)
    for (const effect of effects) {
      // The effect came from this kind's machine, whose effect map types this kind's handlers (EffectHandlers).
      const handler = (handlers[actor.kind] as Record<string, AnyEffectHandler>)[effect.type];
      // What an effect dispatches is its result: the work is done, the event is not on disk yet.
      const ctx: EffectContext = {
        actor,
        dispatch: (e) => {
          const fenced = this.fenced.get(actor);
          if (fenced) return Promise.reject(fenced);
          this.faults('before-result', { eventType: e.type, effect: effect.type });
          return this.enqueue(actor.kind, actor.id, e, true).catch((err: unknown) => {
            if (err instanceof FencedError) this.fenced.set(actor, err);
            throw err;
          });
        },
      };
      try {
        // Only a handler map built around the types (plain JS, a cast) lacks one: a failure of the effect, recorded.
        if (!handler) throw new UnknownEffectError(actor.kind, effect.type);
        await handler(effect.params, ctx);
        this.faults('after-effect', { effect: effect.type });
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        this.opts.bus.emit('effect:error', { id: actor.id, kind: actor.kind, effect: effect.type, error: message });
        this.opts.log?.(`effect ${effect.type} of ${actor.stream} failed: ${message}`);
        if (this.fenced.has(actor) || err instanceof FencedError) return; // not this node's to record (see `fenced`)
        const ev = this.opts.onEffectError?.(actor.kind, effect, err);
        if (ev && !this.closed) await ctx.dispatch(ev).catch(() => undefined);
      }
    }
  }

  private track(p: Promise<unknown>, stream: string): void {
    this.pending.add(p);
    let set = this.pendingByStream.get(stream);
    if (!set) this.pendingByStream.set(stream, (set = new Set()));
    set.add(p);
    void p
      .finally(() => {
        this.pending.delete(p);
        set.delete(p);
        if (set.size === 0 && this.pendingByStream.get(stream) === set) this.pendingByStream.delete(stream);
      })
      .catch(() => undefined); // runEffects reports its failures as events; never an unhandled rejection
  }

  /** The fault-injection hook this host was given (recovery code reports its own points through it). */
  get faultHook(): FaultHook {
    return this.faults;
  }

  /** Whether this actor has an effect running or an event queued (recovery leaves such actors alone). */
  busy(kind: ActorKind, id: string): boolean {
    const stream = streamName(kind, id);
    return (this.pendingByStream.get(stream)?.size ?? 0) > 0 || this.queues.has(stream);
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
        ...(this.pendingByStream.get(stream) ?? []),
        ...(this.queues.has(stream) ? [this.queues.get(stream)!] : []),
      ];
      if (waiting.length === 0) return;
      await Promise.allSettled(waiting);
    }
  }

  /** Resolves when no effect is running and no event is queued (tests, graceful shutdown). */
  async idle(): Promise<void> {
    while (this.pending.size > 0 || this.queues.size > 0) {
      await Promise.allSettled([...this.pending, ...this.queues.values()]);
    }
  }

  /** Runs effects again for a rehydrated actor (e.g. a timer that was armed before a restart). */
  resumeEffects(actor: LiveActor, effects: readonly KindEffect<ActorKind>[]): void {
    if (effects.length > 0) this.track(this.runEffects(actor, effects), actor.stream);
  }

  close(): void {
    this.closed = true;
  }

  static idFromStream(stream: string): { kind: ActorKind; id: string } | null {
    return parseStreamName(stream);
  }
}

const isUnavailable = (err: unknown): boolean => err instanceof RunlogError && err.code === 'STORE_UNAVAILABLE';

/** The event an append that was cut off tried to write (same type, time and content) — it committed after all. */
function sameEvent(recorded: RecordedEvent, sent: NewEvent): boolean {
  return recorded.type === sent.type && recorded.at === sent.at && canonical(recorded.data) === canonical(sent.data);
}

/** JSON with object keys sorted (PostgreSQL's jsonb gives them back in its own order). */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}
