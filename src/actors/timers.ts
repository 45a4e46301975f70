// Restart timers are events: scheduling appends `instance.restart-scheduled {dueAt}`, firing appends
// `instance.restart-due`. A timer that came due while the supervisor was down fires once at start.
import type { InstanceContext } from '../machines/instance.machine.ts';
import { stateName } from '../machines/replay.ts';
import type { ActorHost, EffectHandlers, LiveActor } from './actor-host.ts';

export class RestartTimers {
  private readonly armed = new Map<string, NodeJS.Timeout>();

  constructor(private readonly host: () => ActorHost, private readonly nowMs: () => number = Date.now) {}

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
    const t = setTimeout(() => {
      this.armed.delete(instanceId);
      void this.host()
        .dispatch('instance', instanceId, { type: 'instance.restart-due', data: { attempt, dueAt } })
        .catch(() => undefined);
    }, delay);
    this.armed.set(instanceId, t);
  }

  cancel(instanceId: string): void {
    const t = this.armed.get(instanceId);
    if (t) clearTimeout(t);
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
    for (const t of this.armed.values()) clearTimeout(t);
    this.armed.clear();
  }
}
