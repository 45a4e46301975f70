// Which actor an id names, from the store alone: no machines are loaded, so `runlog events <id>` and `runlog
// export <id>` print their first line without paying for XState (inspection.ts, which folds, re-exports it).
import { NotFoundError } from '../domain/errors.ts';
import { streamName, type ActorKind } from '../domain/events.ts';
import type { EventStorePort } from '../store/port.ts';

/** Finds which stream an id names: instance ids and execution ids share no prefix, but users may type either. */
export async function resolveActor(
  store: Pick<EventStorePort, 'getActor' | 'streamVersion' | 'listActors'>,
  id: string,
): Promise<{ kind: ActorKind; id: string; stream: string }> {
  const row = await store.getActor(id);
  if (row) return { kind: row.kind as ActorKind, id: row.id, stream: row.stream };
  for (const kind of ['instance', 'execution'] as const) {
    const stream = streamName(kind, id);
    if ((await store.streamVersion(stream)) > 0) return { kind, id, stream };
  }
  // Allow a unique prefix, like git does for commits.
  const matches = (await store.listActors({ all: true })).filter((r) => r.id.startsWith(id));
  if (matches.length === 1)
    return { kind: matches[0]!.kind as ActorKind, id: matches[0]!.id, stream: matches[0]!.stream };
  if (matches.length > 1)
    throw new NotFoundError('unique actor', `${id} (ambiguous: ${matches.map((m) => m.id).join(', ')})`);
  throw new NotFoundError('actor', id);
}
