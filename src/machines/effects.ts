// Effects are data: a machine names what should happen and with which parameters; the actor host
// decides how (adapters) and turns the outcome into new events. Replay drops them.

export interface Effect {
  type: string;
  params: Record<string, unknown>;
}

/** XState built-ins that are bookkeeping, not effects. */
const INTERNAL = /^xstate\./;

export function toEffects(actions: readonly { type: string; params?: unknown }[]): Effect[] {
  const out: Effect[] = [];
  for (const a of actions) {
    if (INTERNAL.test(a.type)) continue;
    out.push({ type: a.type, params: (a.params ?? {}) as Record<string, unknown> });
  }
  return out;
}

/** The machines' action implementations: effects never execute inside a machine. */
export const noEffect = (_args: unknown, _params: Record<string, unknown>): void => {};
