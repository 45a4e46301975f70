// The wall clock behind the Clock port (domain/clock.ts).
import type { Clock } from '../../domain/clock.ts';

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  after(ms, fn, opts) {
    const t = setTimeout(fn, ms);
    if (opts?.unref) t.unref();
    return () => clearTimeout(t);
  },
};
