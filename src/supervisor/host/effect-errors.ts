// What an effect that threw becomes in the actor's log: a crash (instance) or a failure (execution), with the
// effect and the error's code. Not a refusal of this node's append as FENCED: that says the node no longer owns
// the actor — nothing about the actor itself — and it is not this node's to record (the owner decides).
import { FencedError } from '../../domain/errors.ts';
import type { ActorKind, KindNewEvent } from '../../domain/events.ts';
import type { Effect } from '../../machines/effects.ts';

/** An effect that threw becomes a fact in the actor's log (null: nothing to record here). */
export function onEffectError(kind: ActorKind, effect: Effect, error: unknown): KindNewEvent<ActorKind> | null {
  if (error instanceof FencedError) return null;
  const message = error instanceof Error ? error.message : String(error);
  const code =
    typeof error === 'object' && error && 'code' in error ? String((error as { code: unknown }).code) : 'EFFECT_FAILED';
  if (kind === 'instance') {
    return { type: 'instance.crashed', data: { reason: 'effect-failed', effect: effect.type, code, message } };
  }
  return { type: 'execution.failed', data: { reason: 'runtime', effect: effect.type, code, message } };
}
