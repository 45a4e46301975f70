// What the event-store contract's specs share: the harness a store's test file gives, the given/when/then runner,
// and small helpers (events, waiting, the actor rows the host computes).
import { expect, it } from 'vitest';
import { parseStreamName, toMachineEvent, type NewEvent } from '../../../src/domain/events.ts';
import { machines, replay, stateName } from '../../../src/machines/runtime.ts';
import { actorStatus, summarize } from '../../../src/machines/summary.ts';
import type { ActorRow, EventStorePort, Projection } from '../../../src/store/port.ts';
import type { UpcasterRegistry } from '../../../src/store/upcasters.ts';

export interface ContractHarness {
  /** A fresh, empty store of its own (its own file, schema or database) with these options. */
  open(options: {
    projections?: Projection<any>[];
    upcasters?: UpcasterRegistry;
    now?: () => string;
  }): Promise<EventStorePort>;
  /**
   * A second handle on the same storage (what another process would open), for stores that have one. The
   * harness closes what it opened after each test.
   */
  second?(first: EventStorePort, options: { projections?: Projection<any>[] }): Promise<EventStorePort>;
  /**
   * How the store keeps the actors projection. 'given' (the default: SQLite, memory): it writes the row each append
   * carries, and replaceActorRows writes the rows it is given. 'folded' (PostgreSQL): it folds the actors projection
   * from the events itself (open() registers it) and may ignore the rows. Rows computed as the host computes them
   * read back the same either way; only a 'given' store is also held to rows no fold would give.
   */
  actorRows?: 'given' | 'folded';
}

export type History = Record<string, string[]>;

export interface Then {
  /** The error code the `when` step must fail with. */
  throws?: string;
  /** Each stream's event types after the step. */
  streams?: History;
  /** The whole log's [stream, type] in global order after the step. */
  log?: [string, string][];
  /** Anything else to check. */
  check?: (store: EventStorePort, result: any) => Promise<void> | void;
}

export interface Spec {
  projections?: Projection<any>[];
  upcasters?: UpcasterRegistry;
  given?: History;
  when: (store: EventStorePort) => Promise<unknown>;
  then: Then;
}

export const ev = (type: string, data: Record<string, unknown> = {}): NewEvent => ({ type, data });
export const evs = (...types: string[]): NewEvent[] => types.map((t) => ev(t));

export async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** Waits (bounded) until cond() holds; fails with what it was waiting for. Not a timing assertion. */
export async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export async function errorOf(p: Promise<unknown>): Promise<any> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to fail, it succeeded');
}

/** A spec runner on one harness: given a history (appended stream by stream), when a step runs, then the stated state. */
export function specRunner(h: ContractHarness): (title: string, s: Spec) => void {
  return (title, s) => {
    it(title, async () => {
      const store = await h.open({ projections: s.projections, upcasters: s.upcasters });
      try {
        for (const [stream, types] of Object.entries(s.given ?? {}))
          await store.appendToStream(stream, evs(...types), { expectedVersion: 'no-stream' });
        let result: unknown;
        if (s.then.throws) {
          const err = await errorOf(s.when(store));
          expect(err.code, String(err.message)).toBe(s.then.throws);
          result = err;
        } else {
          result = await s.when(store);
        }
        for (const [stream, types] of Object.entries(s.then.streams ?? {})) {
          expect(
            (await collect(store.readStream(stream))).map((e) => e.type),
            stream,
          ).toEqual(types);
          expect(await store.streamVersion(stream)).toBe(types.length);
        }
        if (s.then.log) {
          const all = await collect(store.readAll());
          expect(all.map((e) => [e.stream, e.type])).toEqual(s.then.log);
          expect(all.map((e) => e.seq)).toEqual(s.then.log.map((_, i) => i + 1));
          expect(await store.lastSeq()).toBe(s.then.log.length);
        }
        await s.then.check?.(store, result);
      } finally {
        await store.close();
      }
    });
  };
}

/**
 * The actors row the host computes for a stream whose events (oldest first, each with its time) are these: the
 * fold of its machine, as the actor host writes it with an append and the actors projection folds it.
 */
export function hostRow(stream: string, events: readonly NewEvent[]): ActorRow {
  const ref = parseStreamName(stream);
  if (!ref || events.length === 0) throw new Error(`${stream} is no actor's stream with events`);
  const snap = replay(
    machines[ref.kind],
    events.map((e) => toMachineEvent({ type: e.type, at: e.at!, data: e.data })),
  );
  return {
    id: ref.id,
    kind: ref.kind,
    stream,
    state: stateName(snap),
    status: actorStatus(snap),
    version: events.length,
    createdAt: events[0]!.at!,
    updatedAt: events.at(-1)!.at!,
    summary: summarize(ref.kind, snap),
  };
}

/** An ISO time `n` seconds into a fixed day (each actor's events carry their own times). */
export const at = (n: number): string => new Date(Date.parse('2026-12-01T00:00:00.000Z') + n * 1000).toISOString();

const instanceSpec = (id: string) => ({
  instanceId: id,
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 10, maxBackoffMs: 20, resetAfterMs: 1000 },
});

/** A live app instance's first events: requested, then spawned (times from `t` on). */
export const liveInstance = (id: string, t: number): NewEvent[] => [
  { type: 'instance.requested', data: { spec: instanceSpec(id) }, at: at(t) },
  { type: 'instance.spawned', data: { pid: 4242, host: '127.0.0.1', port: 4100, containerId: null }, at: at(t + 1) },
];

/** An execution that ended: requested, then failed validation (times from `t` on). */
export const endedExecution = (id: string, t: number): NewEvent[] => [
  {
    type: 'execution.requested',
    data: {
      request: {
        executionId: id,
        uri: 'at://did:plc:contract/dev.mainasara.at-run.beta.v2.code/3l2contract',
        handler: 'greet',
        input: {},
        callerDid: 'did:plc:caller',
        timeoutMs: 30000,
      },
      deadline: at(t + 600),
    },
    at: at(t),
  },
  {
    type: 'execution.failed',
    data: { reason: 'validation', code: 'CONTRACT', message: 'failed: validation', stderrTail: null },
    at: at(t + 1),
  },
];

/** Appends an actor's events one at a time, each with the row the host computes then: what the actor host does. */
export async function appendAsHost(
  store: EventStorePort,
  stream: string,
  events: readonly NewEvent[],
  from = 0,
): Promise<ActorRow> {
  let row: ActorRow | undefined;
  for (let i = from; i < events.length; i++) {
    row = hostRow(stream, events.slice(0, i + 1));
    await store.appendToStream(stream, [events[i]!], { expectedVersion: i, row });
  }
  return row!;
}
