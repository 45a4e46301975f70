// Running an actor's effects, after the event that asked for them is on disk (rule 1): each effect's handler gets a
// context whose dispatch records its results as observed facts, a handler that throws has its failure turned into
// an event, and the running effects are tracked per actor so recovery and shutdown can wait for them.
import { FencedError, RunlogError } from '../../domain/errors.ts';
import type { ActorKind, KindNewEvent, NewEvent } from '../../domain/events.ts';
import type { Effect } from '../../machines/effects.ts';
import type { AllEffectHandlers, DispatchResult, EffectContext, LiveActor } from './actor-host.ts';
import type { Bus } from './bus.ts';
import type { FaultHook } from './faults.ts';

/** A handler as the host calls it: the effect came from the machine whose map typed the handler. */
type AnyEffectHandler = (params: unknown, ctx: EffectContext) => Promise<void> | void;

export class UnknownEffectError extends RunlogError {
  constructor(kind: ActorKind, type: string) {
    super('UNKNOWN_EFFECT', `the ${kind} machine emitted ${type}, which has no handler`, { kind, type });
  }
}

export interface EffectRunnerDeps {
  /** The effect handlers; null = effects are not run here (see ActorHostOptions.effects). */
  effects: AllEffectHandlers | null;
  bus: Bus;
  log?: (msg: string) => void;
  faults: FaultHook;
  /** Turns an effect that threw into an event, so the failure is in the log (not just in a console). */
  onEffectError?: (kind: ActorKind, effect: Effect, error: unknown) => KindNewEvent<ActorKind> | null;
  /** The actors an append was refused for as FENCED (the host's; see ActorHost `fenced`). */
  fenced: WeakMap<LiveActor, FencedError>;
  /** Queues an effect's result for its actor as an observed fact (ActorHost dispatchObserved). */
  report: (actor: LiveActor, event: NewEvent<string, object>) => Promise<DispatchResult>;
  /** Whether the host is closing (a failure is then no longer recorded). */
  closed: () => boolean;
}

export class EffectRunner {
  private readonly pending = new Set<Promise<unknown>>();
  private readonly pendingByStream = new Map<string, Set<Promise<unknown>>>();

  constructor(private readonly deps: EffectRunnerDeps) {}

  /** Runs the effects in the background, tracked under the actor's stream. */
  run(actor: LiveActor, effects: readonly Effect[]): void {
    this.track(this.runEffects(actor, effects), actor.stream);
  }

  /** How many effects are running, on any actor. */
  get size(): number {
    return this.pending.size;
  }

  /** Every running effect (to wait for). */
  all(): Promise<unknown>[] {
    return [...this.pending];
  }

  /** The effects running for one actor's stream (none: empty). */
  runningFor(stream: string): Promise<unknown>[] {
    return [...(this.pendingByStream.get(stream) ?? [])];
  }

  /** Whether an effect of this stream is running. */
  busy(stream: string): boolean {
    return (this.pendingByStream.get(stream)?.size ?? 0) > 0;
  }

  private async runEffects(actor: LiveActor, effects: readonly Effect[]): Promise<void> {
    const { deps } = this;
    const handlers = deps.effects;
    if (!handlers) return; // a host that runs no effects (see ActorHostOptions.effects)
    for (const effect of effects) {
      // The effect came from this kind's machine, whose effect map types this kind's handlers (EffectHandlers).
      const handler = (handlers[actor.kind] as Record<string, AnyEffectHandler>)[effect.type];
      // What an effect dispatches is its result: the work is done, the event is not on disk yet.
      const ctx: EffectContext = {
        actor,
        dispatch: (e) => {
          const fenced = deps.fenced.get(actor);
          if (fenced) return Promise.reject(fenced);
          deps.faults('before-result', { eventType: e.type, effect: effect.type });
          return deps.report(actor, e).catch((err: unknown) => {
            if (err instanceof FencedError) deps.fenced.set(actor, err);
            throw err;
          });
        },
      };
      try {
        // Only a handler map built around the types (plain JS, a cast) lacks one: a failure of the effect, recorded.
        if (!handler) throw new UnknownEffectError(actor.kind, effect.type);
        await handler(effect.params, ctx);
        deps.faults('after-effect', { effect: effect.type });
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        deps.bus.emit('effect:error', { id: actor.id, kind: actor.kind, effect: effect.type, error: message });
        deps.log?.(`effect ${effect.type} of ${actor.stream} failed: ${message}`);
        if (deps.fenced.has(actor) || err instanceof FencedError) return; // not this node's to record (see `fenced`)
        const ev = deps.onEffectError?.(actor.kind, effect, err);
        if (ev && !deps.closed()) await ctx.dispatch(ev).catch(() => undefined);
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
}
