// The wall clock behind the Clock port (domain/clock.ts).
import type { Clock } from '../domain/clock.ts';

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
};
