// Restart timers are events: scheduling appends `instance.restart-scheduled {dueAt}`, firing appends
// `instance.restart-due`. A timer that came due while the supervisor was down fires once at start.
import type { Clock } from '../domain/clock.ts';
import type { InstanceContext } from '../machines/instance.machine.ts';
import { stateName } from '../machines/runtime.ts';
import type { ActorHost, EffectHandlers, LiveActor } from './actor-host.ts';
import { systemClock } from './system-clock.ts';

export class RestartTimers {
  /** The armed timers' cancel functions, by instance. */
  private readonly armed = new Map<string, () => void>();

  constructor(private readonly host: () => ActorHost, private readonly clock: Clock = systemClock) {}

  private nowMs(): number {
    return this.clock.nowMs();
  }

  handlers(): Pick<EffectHandlers<'instance'>, 'scheduleRestart' | 'cancelRestart'> {
    return {
      scheduleRestart: async (params, ctx) => {
        const delayMs = Number(params.delayMs ?? 0);
        const dueAt = new Date(this.nowMs() + delayMs).toISOString();
        const r = await ctx.dispatch({ type: 'instance.restart-scheduled', data: { attempt: params.attempt, delayMs, dueAt } });
        if (r.accepted) this.arm(ctx.actor.id, dueAt, Number(params.attempt));
      },
      cancelRestart: (params) => {
        this.cancel(String(params.instanceId));
      },
    };
  }

  private arm(instanceId: string, dueAt: string, attempt: number): void {
    this.cancel(instanceId);
    const delay = Math.max(0, Date.parse(dueAt) - this.nowMs());
    const cancel = this.clock.after(delay, () => {
      this.armed.delete(instanceId);
      void this.host()
        .dispatch('instance', instanceId, { type: 'instance.restart-due', data: { attempt, dueAt } })
        .catch(() => undefined);
    });
    this.armed.set(instanceId, cancel);
  }

  cancel(instanceId: string): void {
    this.armed.get(instanceId)?.();
    this.armed.delete(instanceId);
  }

  /** After a restart: re-arm persisted timers (overdue ones fire now), re-plan unscheduled ones. */
  resume(actor: LiveActor): void {
    if (actor.kind !== 'instance' || stateName(actor.snapshot) !== 'crashed.backoff') return;
    const c = actor.snapshot.context as InstanceContext;
    if (c.nextRestartAt) this.arm(actor.id, c.nextRestartAt, c.restarts + 1);
    else this.host().resumeEffects(actor, [{ type: 'scheduleRestart', params: { instanceId: actor.id, attempt: c.restarts + 1, delayMs: c.nextRestartDelayMs ?? 0 } }]);
  }

  pendingCount(): number {
    return this.armed.size;
  }

  close(): void {
    for (const cancel of this.armed.values()) cancel();
    this.armed.clear();
  }
}
