// A simulated Clock (domain/clock.ts): time moves only when the test says so, and timers that come due fire
// in due order. Restart backoffs run in microseconds of real time, and a test sees exactly when each fires.
import type { Clock } from '../../src/domain/clock.ts';

export class SimulatedClock implements Clock {
  private timers: { at: number; seq: number; fn: () => void }[] = [];
  private seq = 0;

  constructor(private now = Date.parse('2026-12-01T12:00:00.000Z')) {}

  nowMs(): number {
    return this.now;
  }

  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.now + Math.max(0, ms), seq: this.seq++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Timers waiting to fire. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing every timer that comes due on the way, in due order. */
  advance(ms: number): void {
    const until = this.now + ms;
    for (;;) {
      const next = this.timers.filter((t) => t.at <= until).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.now = next.at;
      next.fn();
    }
    this.now = until;
  }
}
