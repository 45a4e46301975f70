// Restart timers are events: scheduling appends `instance.restart-scheduled {dueAt}`, firing appends
// `instance.restart-due`. The timer itself is armed only from the machine's output (`armRestart`, emitted when
// `instance.restart-scheduled` is on disk, and again when a restarted supervisor recovers the actor), so a timer
// that came due while the supervisor was down fires once at start, at the due time the log holds.
//
// A cluster node that takes an instance over and cannot record it (`instance.recovered`: PostgreSQL briefly
// unreachable) arms its persisted timer straight from the log's state (rearm, supervisor/cluster/takeover.ts): a timer that
// waited for that record would never fire while the lease stays with the node. A firing whose append failed is
// tried again while the instance still waits for it here.
import type { Clock } from '../../domain/clock.ts';
import { FencedError, RunlogError } from '../../domain/errors.ts';
import type { InstanceContext } from '../../machines/instance.machine.ts';
import { stateName } from '../../machines/runtime.ts';
import type { ActorHost, EffectHandlers, LiveActor } from './actor-host.ts';
import { systemClock } from './system-clock.ts';

/** How long after a failed firing it is tried again. */
const REFIRE_MS = 1000;

/** The restart timer the log holds for an instance (crashed.backoff with its restart scheduled), or null. */
export function persistedTimer(actor: Pick<LiveActor, 'kind' | 'snapshot'>): { attempt: number; dueAt: string } | null {
  if (actor.kind !== 'instance' || stateName(actor.snapshot) !== 'crashed.backoff') return null;
  const c = actor.snapshot.context as InstanceContext;
  return c.nextRestartAt === null ? null : { attempt: c.restarts + 1, dueAt: c.nextRestartAt };
}

export class RestartTimers {
  /** The armed timers' cancel functions, by instance. */
  private readonly armed = new Map<string, () => void>();
  private closed = false;

  constructor(
    private readonly host: () => ActorHost,
    private readonly clock: Clock = systemClock,
  ) {}

  handlers(): Pick<EffectHandlers<'instance'>, 'scheduleRestart' | 'armRestart' | 'cancelRestart'> {
    return {
      // The due time is decided here (it reads the clock) and recorded; the machine answers with armRestart.
      scheduleRestart: async (params, ctx) => {
        const delayMs = Number(params.delayMs ?? 0);
        const dueAt = new Date(this.clock.nowMs() + delayMs).toISOString();
        await ctx.dispatch({ type: 'instance.restart-scheduled', data: { attempt: params.attempt, delayMs, dueAt } });
      },
      armRestart: (params) => {
        this.arm(params.instanceId, params.dueAt, params.attempt);
      },
      cancelRestart: (params) => {
        this.cancel(String(params.instanceId));
      },
    };
  }

  /** Arms the actor's persisted timer (a takeover not recorded: see above); false when the log holds none. */
  rearm(actor: LiveActor): boolean {
    const t = persistedTimer(actor);
    if (t) this.arm(actor.id, t.dueAt, t.attempt);
    return t !== null;
  }

  private arm(
    instanceId: string,
    dueAt: string,
    attempt: number,
    delayMs = Math.max(0, Date.parse(dueAt) - this.clock.nowMs()),
  ): void {
    this.cancel(instanceId);
    if (this.closed) return;
    const cancel = this.clock.after(delayMs, () => {
      this.armed.delete(instanceId);
      void this.host()
        .dispatchObserved('instance', instanceId, { type: 'instance.restart-due', data: { attempt, dueAt } })
        .catch((err: unknown) => {
          // Not recorded (the store refused it): tried again while the instance still waits for this very timer
          // here. A node that lost the lease (FENCED) or is closing (HOST_CLOSED) leaves it to whoever holds it.
          if (err instanceof FencedError || (err instanceof RunlogError && err.code === 'HOST_CLOSED')) return;
          const host = this.host();
          const actor = host.holds(`instance-${instanceId}`) ? host.get('instance', instanceId) : undefined;
          const t = actor ? persistedTimer(actor) : null;
          if (t?.dueAt === dueAt && !this.armed.has(instanceId)) this.arm(instanceId, dueAt, attempt, REFIRE_MS);
        });
    });
    this.armed.set(instanceId, cancel);
  }

  cancel(instanceId: string): void {
    this.armed.get(instanceId)?.();
    this.armed.delete(instanceId);
  }

  pendingCount(): number {
    return this.armed.size;
  }

  close(): void {
    this.closed = true;
    for (const cancel of this.armed.values()) cancel();
    this.armed.clear();
  }
}
