// The event-store contract, part two: what the actor host, the supervisor, the CLI and retention call beyond
// appending and reading events — the actors row and snapshot an append carries (written in its transaction),
// the actors projection, snapshots, streams, recent request events, the heartbeat, filtered subscriptions and
// paged reads of long histories. Run by contract.ts on every store.
import { describe, expect } from 'vitest';
import type { NewEvent, RecordedEvent } from '../../../src/domain/events.ts';
import type {
  ActorRow,
  EventStorePort,
  Heartbeat,
  Projection,
  SnapshotRecord,
  StreamAppendOutcome,
} from '../../../src/store/port.ts';
import {
  appendAsHost,
  at,
  collect,
  endedExecution,
  ev,
  evs,
  hostRow,
  liveInstance,
  until,
  type ContractHarness,
  type Spec,
} from './contract-support.ts';

/** Throws on a poison event: the append it is part of must not commit (nor its row or snapshot). */
const strict: Projection<{ n: number }> = {
  name: 'strict',
  evolve: (doc, e) => {
    if (e.type === 'poison') throw new Error('projection refused poison');
    return { n: (doc?.n ?? 0) + 1 };
  },
};

const snapshot = (stream: string, version: number, tag = 'fold'): SnapshotRecord => ({
  stream,
  version,
  fingerprint: 'fp-1',
  createdAt: at(0),
  state: JSON.stringify({ tag, version }),
  checksum: `sum-${tag}-${version}`,
});

/** Three actors created in this order (ids deliberately not in that order): a live instance, an ended execution, a live instance. */
async function threeActors(s: EventStorePort): Promise<{ z: ActorRow; b: ActorRow; a: ActorRow }> {
  const z = await appendAsHost(s, 'instance-inst_z', liveInstance('inst_z', 0));
  const b = await appendAsHost(s, 'execution-exec_b', endedExecution('exec_b', 10));
  const a = await appendAsHost(s, 'instance-inst_a', liveInstance('inst_a', 20));
  return { z, b, a };
}

/** Appends `n` events to each of `streams`, round robin, in batches (a log longer than any store's page). */
async function longLog(s: EventStorePort, streams: string[], n: number): Promise<void> {
  for (let i = 0; i < n; i += 100) {
    await s.appendMany(
      streams.map((stream) => ({
        stream,
        events: Array.from({ length: Math.min(100, n - i) }, (_, k) => ev('tick', { i: i + k })),
        expectedVersion: i,
      })),
    );
  }
}

export function hostContract(h: ContractHarness, spec: (title: string, s: Spec) => void): void {
  const given = (h.actorRows ?? 'given') === 'given';

  describe('the actors row and snapshot an append carries', () => {
    spec('each append writes the row the host computed in its own transaction; getActor and listActors read it back', {
      when: async (s) => {
        const events = liveInstance('inst_a', 0);
        await appendAsHost(s, 'instance-inst_a', events, 0);
        const row = hostRow('instance-inst_a', events);
        expect(row).toMatchObject({
          id: 'inst_a',
          kind: 'instance',
          status: 'active',
          version: 2,
          createdAt: at(0),
          updatedAt: at(1),
        });
        expect(await s.getActor('inst_a')).toEqual(row);
        expect(await s.listActors()).toEqual([row]);
        expect(await s.getActor('nobody')).toBeUndefined();
      },
      then: { streams: { 'instance-inst_a': ['instance.requested', 'instance.spawned'] } },
    });
    spec('listActors gives live actors by default and every one with all, oldest first, of one kind when asked', {
      when: async (s) => {
        const { z, b, a } = await threeActors(s);
        expect(b.status).toBe('terminal');
        expect(await s.listActors()).toEqual([z, a]);
        expect(await s.listActors({ all: true })).toEqual([z, b, a]);
        expect(await s.listActors({ kind: 'execution', all: true })).toEqual([b]);
        expect(await s.listActors({ kind: 'execution' })).toEqual([]);
        expect(await s.listActors({ kind: 'instance' })).toEqual([z, a]);
        expect(await s.getActor('exec_b')).toEqual(b);
      },
      then: {},
    });
    spec(
      'a request that conflicts or cannot be encoded writes neither its row nor its snapshot; the others in the batch do',
      {
        when: async (s) => {
          const a = liveInstance('inst_a', 0);
          const c = liveInstance('inst_c', 10);
          const d = liveInstance('inst_d', 20);
          const before = await appendAsHost(s, 'instance-inst_c', c.slice(0, 1));
          const outcomes = await s.appendMany([
            {
              stream: 'instance-inst_a',
              events: a,
              expectedVersion: 'no-stream',
              row: hostRow('instance-inst_a', a),
              snapshot: snapshot('instance-inst_a', 2),
            },
            {
              stream: 'instance-inst_c',
              events: c.slice(1),
              expectedVersion: 0,
              row: hostRow('instance-inst_c', c),
              snapshot: snapshot('instance-inst_c', 2),
            },
            {
              stream: 'instance-inst_d',
              events: [...d.slice(0, 1), ev('note', { big: 10n })],
              expectedVersion: 'no-stream',
              row: hostRow('instance-inst_d', d.slice(0, 1)),
              snapshot: snapshot('instance-inst_d', 2),
            },
          ]);
          expect(outcomes.map((o: StreamAppendOutcome) => (o.ok ? 'ok' : o.error.code))).toEqual([
            'ok',
            'CONCURRENCY',
            'EVENT_NOT_ENCODABLE',
          ]);
          expect(await s.listActors({ all: true })).toEqual([hostRow('instance-inst_a', a), before]);
          expect(await s.snapshotAtOrBefore('instance-inst_a')).toEqual(snapshot('instance-inst_a', 2));
          expect(await s.snapshotAtOrBefore('instance-inst_c')).toBeUndefined();
          expect(await s.snapshotAtOrBefore('instance-inst_d')).toBeUndefined();
        },
        then: {
          log: [
            ['instance-inst_c', 'instance.requested'],
            ['instance-inst_a', 'instance.requested'],
            ['instance-inst_a', 'instance.spawned'],
          ],
        },
      },
    );
    spec('a projection that throws rolls the row and the snapshot back with the events', {
      projections: [strict],
      when: async (s) => {
        const events = liveInstance('inst_a', 0);
        await appendAsHost(s, 'instance-inst_a', events.slice(0, 1));
        await s.appendToStream('instance-inst_a', events.slice(1), {
          expectedVersion: 1,
          row: hostRow('instance-inst_a', events),
          snapshot: snapshot('instance-inst_a', 2),
        });
        const poisoned: NewEvent[] = [{ type: 'poison', data: {}, at: at(5) }];
        const err = await s
          .appendToStream('instance-inst_a', poisoned, {
            expectedVersion: 2,
            row: { ...hostRow('instance-inst_a', events), version: 3, updatedAt: at(5) },
            snapshot: snapshot('instance-inst_a', 3),
          })
          .catch((e: unknown) => e);
        expect(err).toMatchObject({ code: 'STORE_PROJECTION' });
        expect(await s.getActor('inst_a')).toEqual(hostRow('instance-inst_a', events));
        expect(await s.snapshotAtOrBefore('instance-inst_a')).toEqual(snapshot('instance-inst_a', 2));
      },
      then: { streams: { 'instance-inst_a': ['instance.requested', 'instance.spawned'] } },
    });
    spec('replaceActorRows with the rows a rebuild computes gives exactly those rows', {
      when: async (s) => {
        const { z, b, a } = await threeActors(s);
        await s.replaceActorRows([a, b, z]);
        expect(await s.listActors({ all: true })).toEqual([z, b, a]);
        expect(await s.getActor('inst_a')).toEqual(a);
      },
      then: {},
    });
    if (given) {
      spec(
        'a store that keeps rows as given returns the row an append carried, and replaceActorRows replaces every row',
        {
          when: async (s) => {
            const events = liveInstance('inst_a', 0);
            const mine: ActorRow = {
              ...hostRow('instance-inst_a', events),
              state: 'as-given',
              summary: { note: 'kept as given', nested: { n: 1 } },
            };
            await s.appendToStream('instance-inst_a', events, { expectedVersion: 'no-stream', row: mine });
            expect(await s.getActor('inst_a')).toEqual(mine);
            await appendAsHost(s, 'execution-exec_b', endedExecution('exec_b', 10));
            const only: ActorRow = { ...mine, id: 'inst_q', stream: 'instance-inst_q', status: 'terminal' };
            await s.replaceActorRows([only]);
            expect(await s.listActors({ all: true })).toEqual([only]);
            expect(await s.listActors()).toEqual([]);
            expect(await s.getActor('exec_b')).toBeUndefined();
          },
          then: {},
        },
      );
    }
  });

  describe('snapshots', () => {
    spec('snapshotAtOrBefore gives the newest snapshot, or the newest at or before a version; older ones are kept', {
      when: async (s) => {
        await s.appendToStream('instance-inst_a', evs('a', 'b'), {
          expectedVersion: 'no-stream',
          snapshot: snapshot('instance-inst_a', 2),
        });
        await s.appendToStream('instance-inst_a', evs('c'), { expectedVersion: 2 });
        await s.appendToStream('instance-inst_a', evs('d'), {
          expectedVersion: 3,
          snapshot: snapshot('instance-inst_a', 4),
        });
        await s.appendToStream('instance-inst_a', evs('e'), { expectedVersion: 4 });
        expect(await s.snapshotAtOrBefore('instance-inst_a')).toEqual(snapshot('instance-inst_a', 4));
        expect(await s.snapshotAtOrBefore('instance-inst_a', 5)).toEqual(snapshot('instance-inst_a', 4));
        expect(await s.snapshotAtOrBefore('instance-inst_a', 4)).toEqual(snapshot('instance-inst_a', 4));
        expect(await s.snapshotAtOrBefore('instance-inst_a', 3)).toEqual(snapshot('instance-inst_a', 2));
        expect(await s.snapshotAtOrBefore('instance-inst_a', 1)).toBeUndefined();
        expect(await s.snapshotAtOrBefore('instance-nobody')).toBeUndefined();
      },
      then: {},
    });
    spec('a snapshot made for another version than the append brings its stream to is not kept', {
      given: { 'instance-inst_a': ['a'] },
      when: async (s) => {
        await s.appendToStream('instance-inst_a', evs('b'), {
          expectedVersion: 1,
          snapshot: snapshot('instance-inst_a', 3),
        });
        await s.appendToStream('instance-inst_a', evs('c'), {
          expectedVersion: 2,
          snapshot: snapshot('instance-inst_b', 3),
        });
        expect(await s.snapshotAtOrBefore('instance-inst_a')).toBeUndefined();
        expect(await s.snapshotAtOrBefore('instance-inst_b')).toBeUndefined();
      },
      then: { streams: { 'instance-inst_a': ['a', 'b', 'c'] } },
    });
  });

  describe('streams', () => {
    spec(
      'listStreams lists every stream in name order with its version and times; a kind is the name before its first dash',
      {
        when: async (s) => {
          const streams = ['order-2', 'orders-1', 'item-1', 'order', 'order-10', 'order.x'];
          for (const [i, stream] of streams.entries()) {
            await s.appendToStream(
              stream,
              [
                { type: 'a', data: {}, at: at(i * 10) },
                { type: 'b', data: {}, at: at(i * 10 + 1) },
              ],
              { expectedVersion: 'no-stream' },
            );
          }
          await s.appendToStream('order-2', [{ type: 'c', data: {}, at: at(99) }], { expectedVersion: 2 });
          expect((await s.listStreams()).map((x) => x.stream)).toEqual([
            'item-1',
            'order',
            'order-10',
            'order-2',
            'order.x',
            'orders-1',
          ]);
          expect(await s.listStreams('order')).toEqual([
            { stream: 'order', kind: 'order', version: 2, createdAt: at(30), updatedAt: at(31) },
            { stream: 'order-10', kind: 'order', version: 2, createdAt: at(40), updatedAt: at(41) },
            { stream: 'order-2', kind: 'order', version: 3, createdAt: at(0), updatedAt: at(99) },
          ]);
          expect(await s.listStreams('nothing')).toEqual([]);
        },
        then: {},
      },
    );
    spec('readRecent gives every event of a young request stream, oldest first', {
      given: { 'queue-1': ['a', 'b', 'c'], 'queue-2': ['x'] },
      when: async (s) => {
        expect((await s.readRecent('queue-1')).map((e) => [e.version, e.type])).toEqual([
          [1, 'a'],
          [2, 'b'],
          [3, 'c'],
        ]);
        expect(await s.readRecent('queue-1')).toEqual(await collect(s.readStream('queue-1')));
        expect(await s.readRecent('nobody')).toEqual([]);
      },
      then: {},
    });
  });

  describe('the heartbeat', () => {
    spec('no heartbeat reads as null; a beat reads back as written, and so does the stop mark', {
      when: async (s) => {
        expect(await s.readHeartbeat()).toBeNull();
        const beat: Heartbeat = {
          node: 'host-1',
          pid: 4242,
          startedAt: at(0),
          beatAt: at(5),
          intervalMs: 1000,
          stoppedAt: null,
        };
        await s.writeHeartbeat(beat);
        expect(await s.readHeartbeat()).toEqual(beat);
        await s.writeHeartbeat({ ...beat, beatAt: at(6), stoppedAt: at(6) });
        expect(await s.readHeartbeat()).toEqual({ ...beat, beatAt: at(6), stoppedAt: at(6) });
      },
      then: {},
    });
  });

  describe('filtered subscriptions', () => {
    spec('a subscription to one stream sees only its events; its position still moves past the others', {
      given: { 'order-1': ['a'], 'order-2': ['x'] },
      when: async (s) => {
        await s.appendToStream('order-1', evs('b'), { expectedVersion: 1 });
        const got: RecordedEvent[] = [];
        const sub = s.subscribe({ from: 1, stream: 'order-2', pollMs: 20 }, async (e) => {
          await new Promise((r) => setTimeout(r, 1)); // awaited: the next event waits for it
          got.push(e);
        });
        await until(() => sub.position === 3, 'the position past order-1');
        expect(got.map((e) => [e.seq, e.type])).toEqual([[2, 'x']]);
        await s.appendToStream('order-1', evs('c'), { expectedVersion: 2 });
        await s.appendToStream('order-2', evs('y'), { expectedVersion: 1 });
        await s.appendToStream('order-1', evs('d'), { expectedVersion: 3 });
        await until(() => sub.position === 6, 'the position at the head');
        await sub.close();
        expect(got.map((e) => [e.seq, e.stream, e.type])).toEqual([
          [2, 'order-2', 'x'],
          [5, 'order-2', 'y'],
        ]);
      },
      then: {},
    });
    spec('a subscription from just past the head sees only what is appended after it', {
      given: { 'order-1': ['a', 'b'] },
      when: async (s) => {
        const head = await s.lastSeq();
        const got: number[] = [];
        const sub = s.subscribe({ from: head + 1, pollMs: 20 }, (e) => void got.push(e.seq));
        expect(sub.position).toBe(head);
        await s.appendToStream('order-2', evs('x'), { expectedVersion: 'no-stream' });
        await until(() => got.length === 1, 'the new event');
        await sub.close();
        expect(got).toEqual([3]);
      },
      then: {},
    });
  });

  describe('paged reads of long histories', () => {
    spec('readAll reads more than a page, with inclusive bounds and a limit', {
      when: async (s) => {
        await longLog(s, ['order-1', 'order-2'], 650);
        const all = await collect(s.readAll());
        expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 1300 }, (_, i) => i + 1));
        expect((await collect(s.readAll({ from: 450, to: 1050 }))).map((e) => e.seq)).toEqual(
          Array.from({ length: 601 }, (_, i) => 450 + i),
        );
        expect((await collect(s.readAll({ from: 2, limit: 700 }))).map((e) => e.seq)).toEqual(
          Array.from({ length: 700 }, (_, i) => 2 + i),
        );
        expect((await collect(s.readAll({ from: 1299, limit: 10 }))).map((e) => e.seq)).toEqual([1299, 1300]);
        expect(await collect(s.readAll({ from: 10, limit: 0 }))).toEqual([]);
      },
      then: {},
    });
    spec('readStream reads more than a page of one stream, with inclusive bounds', {
      when: async (s) => {
        await longLog(s, ['order-1', 'order-2'], 650);
        const one = await collect(s.readStream('order-2'));
        expect(one.map((e) => e.version)).toEqual(Array.from({ length: 650 }, (_, i) => i + 1));
        expect(one.every((e) => e.stream === 'order-2')).toBe(true);
        expect(
          (await collect(s.readStream('order-1', { from: 99, to: 601 }))).map((e) => [e.version, e.data.i]),
        ).toEqual(Array.from({ length: 503 }, (_, i) => [99 + i, 98 + i]));
      },
      then: {},
    });
    spec('a read left early lets go: the store appends and closes as usual', {
      when: async (s) => {
        await longLog(s, ['order-1'], 600);
        const seen: number[] = [];
        for await (const e of s.readAll()) {
          seen.push(e.seq);
          if (seen.length === 3) break;
        }
        for await (const e of s.readStream('order-1', { from: 599 })) seen.push(e.version);
        expect(seen).toEqual([1, 2, 3, 599, 600]);
        await s.appendToStream('order-1', evs('after'), { expectedVersion: 600 });
      },
      then: {},
    });
  });
}
