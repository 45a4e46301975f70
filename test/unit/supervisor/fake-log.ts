// A log in memory behind the store port, for the services that follow the log (settle waits, the execution
// queue, placement, hand-over): what they read and the order they are told, without a store.
import type { RecordedEvent } from '../../../src/domain/events.ts';
import type { EventStorePort, Subscription } from '../../../src/store/port.ts';

/**
 * A log in memory behind the port, whose subscribers can be kept from hearing an event (`notify` false: as if they
 * had not read it yet, though it is in the log): what follows the log then learns it only by reading again.
 */
export function fakeLog() {
  const events: RecordedEvent[] = [];
  const unheard = new Set<RecordedEvent>();
  const subs = new Set<{ from: number; stream?: string; h: (e: RecordedEvent) => void | Promise<void> }>();
  const put = (
    stream: string,
    type: string,
    data: Record<string, unknown>,
    notify = true,
    at = new Date().toISOString(),
  ) => {
    const e = {
      seq: events.length + 1,
      stream,
      version: events.filter((x) => x.stream === stream).length + 1,
      type,
      data,
      meta: {},
      at,
    } as unknown as RecordedEvent;
    events.push(e);
    if (!notify) unheard.add(e);
    else for (const s of subs) if (e.seq >= s.from && (!s.stream || s.stream === stream)) void s.h(e);
    return e;
  };
  const ofStream = (stream: string) => events.filter((e) => e.stream === stream);
  const unused = (what: string) => () => {
    throw new Error(`the fake log has no ${what}`);
  };
  const store: EventStorePort = {
    description: 'fake',
    async *readStream(stream, o = {}) {
      yield* ofStream(stream).filter((e) => e.version >= (o.from ?? 1) && e.version <= (o.to ?? Infinity));
    },
    streamVersion: async (stream) => ofStream(stream).length,
    listStreams: async (kind) =>
      [...new Set(events.map((e) => e.stream))]
        .filter((stream) => !kind || stream.split('-')[0] === kind)
        .sort()
        .map((stream) => {
          const es = ofStream(stream);
          return {
            stream,
            kind: stream.split('-')[0]!,
            version: es.length,
            createdAt: es[0]!.at,
            updatedAt: es.at(-1)!.at,
          };
        }),
    readRecent: async (stream) => ofStream(stream),
    appendToStream: unused('appendToStream'),
    appendMany: unused('appendMany'),
    async *readAll(o = {}) {
      yield* events.filter((e) => e.seq >= (o.from ?? 1) && e.seq <= (o.to ?? Infinity)).slice(0, o.limit ?? Infinity);
    },
    lastSeq: async () => events.length,
    subscribe(o, h): Subscription {
      const s = { from: o.from ?? 1, ...(o.stream ? { stream: o.stream } : {}), h };
      subs.add(s);
      // What is in the log from `from` on already (and was heard) is delivered first, as a store does.
      for (const e of events) if (e.seq >= s.from && !unheard.has(e) && (!s.stream || s.stream === e.stream)) void h(e);
      return {
        position: 0,
        close: async () => void subs.delete(s),
      };
    },
    projection: unused('projections'),
    rebuildProjection: unused('projections'),
    listActors: async () => [],
    getActor: async () => undefined,
    replaceActorRows: unused('actors projection'),
    snapshotAtOrBefore: async () => undefined,
    readHeartbeat: async () => null,
    writeHeartbeat: async () => undefined,
    close: async () => undefined,
  };
  return { store, put, events, subscribers: () => subs.size };
}
