// Restart timers are events: scheduling appends `instance.restart-scheduled {dueAt}`, firing appends
// `instance.restart-due`. The timer itself is armed only from the machine's output (`armRestart`, emitted when
// `instance.restart-scheduled` is on disk, and again when a restarted supervisor recovers the actor), so a timer
// that came due while the supervisor was down fires once at start, at the due time the log holds.
import type { Clock } from '../domain/clock.ts';
import type { ActorHost, EffectHandlers } from './actor-host.ts';
import { systemClock } from './system-clock.ts';

export class RestartTimers {
  /** The armed timers' cancel functions, by instance. */
  private readonly armed = new Map<string, () => void>();

  constructor(private readonly host: () => ActorHost, private readonly clock: Clock = systemClock) {}

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

  private arm(instanceId: string, dueAt: string, attempt: number): void {
    this.cancel(instanceId);
    const delay = Math.max(0, Date.parse(dueAt) - this.clock.nowMs());
    const cancel = this.clock.after(delay, () => {
      this.armed.delete(instanceId);
      void this.host()
        .dispatchObserved('instance', instanceId, { type: 'instance.restart-due', data: { attempt, dueAt } })
        .catch(() => undefined);
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
    for (const cancel of this.armed.values()) cancel();
    this.armed.clear();
  }
}
