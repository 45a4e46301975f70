// Which actor an id names, from the store alone: no machines are loaded, so `runlog events <id>` and `runlog
// export <id>` print their first line without paying for XState (inspection.ts, which folds, re-exports it).
import { NotFoundError } from '../domain/errors.ts';
import { streamName, type ActorKind } from '../domain/events.ts';
import type { EventStore } from '../store/event-store.ts';
import type { ReadableLog } from '../store/host-store.ts';

/** Finds which stream an id names: instance ids and execution ids share no prefix, but users may type either. */
export function resolveActor(store: Pick<EventStore, 'getActor' | 'streamVersion' | 'listActors'>, id: string): { kind: ActorKind; id: string; stream: string } {
  const row = store.getActor(id);
  if (row) return { kind: row.kind as ActorKind, id: row.id, stream: row.stream };
  for (const kind of ['instance', 'execution'] as const) {
    const stream = streamName(kind, id);
    if (store.streamVersion(stream) > 0) return { kind, id, stream };
  }
  // Allow a unique prefix, like git does for commits.
  const matches = store.listActors({ all: true }).filter((r) => r.id.startsWith(id));
  if (matches.length === 1) return { kind: matches[0]!.kind as ActorKind, id: matches[0]!.id, stream: matches[0]!.stream };
  if (matches.length > 1) throw new NotFoundError('unique actor', `${id} (ambiguous: ${matches.map((m) => m.id).join(', ')})`);
  throw new NotFoundError('actor', id);
}

/**
 * resolveActor, then the actor's whole history made readable where the store pages ended actors' events out (a
 * PostgreSQL copy: ReadableLog.pageIn reads them back). A one-shot command that reads one actor calls this first;
 * without it the read of an ended actor would throw PAGED_OUT.
 */
export async function resolveReadableActor(store: Pick<ReadableLog, 'getActor' | 'streamVersion' | 'listActors' | 'pageIn'>, id: string): Promise<{ kind: ActorKind; id: string; stream: string }> {
  const ref = resolveActor(store, id);
  await store.pageIn?.(ref.stream);
  return ref;
}
