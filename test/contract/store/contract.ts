// The event-store contract: every guarantee of the port (src/store/port.ts), written once as given/when/then
// specs and run against each implementation (memory, SQLite, PostgreSQL) by the *.test.ts files beside it.
import { describe, expect } from 'vitest';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import type { Projection, StreamAppendOutcome } from '../../../src/store/port.ts';
import { UpcasterRegistry } from '../../../src/store/upcasters.ts';
import { collect, errorOf, ev, evs, specRunner, until, type ContractHarness } from './contract-support.ts';
import { hostContract } from './contract-host.ts';

export type { ContractHarness } from './contract-support.ts';

/** Counts events per stream: a document per stream, written in the append transaction. */
const counter: Projection<{ count: number; last: string }> = {
  name: 'counter',
  evolve: (doc, e) => ({ count: (doc?.count ?? 0) + 1, last: e.type }),
};

/** Reads only `item.*` events, keeps one document per item id, deletes it on item.removed. */
const items: Projection<{ name: string }> = {
  name: 'items',
  canHandle: ['item.added', 'item.renamed', 'item.removed'],
  documentId: (e) => String(e.data.id),
  evolve: (doc, e) => (e.type === 'item.removed' ? null : { name: String(e.data.name ?? doc?.name) }),
};

/** Throws on a poison event type: the append it is part of must not commit. */
const strict: Projection<{ n: number }> = {
  name: 'strict',
  evolve: (doc, e) => {
    if (e.type === 'poison') throw new Error('projection refused poison');
    return { n: (doc?.n ?? 0) + 1 };
  },
};

export function eventStoreContract(name: string, h: ContractHarness): void {
  const spec = specRunner(h);

  describe(`event store contract: ${name}`, () => {
    describe('optimistic concurrency', () => {
      spec("'no-stream' creates a stream", {
        when: (s) => s.appendToStream('order-1', evs('a', 'b'), { expectedVersion: 'no-stream' }),
        then: {
          streams: { 'order-1': ['a', 'b'] },
          check: (_, r) => expect(r).toMatchObject({ version: 2, lastSeq: 2 }),
        },
      });
      spec("'no-stream' on an existing stream is a conflict and writes nothing", {
        given: { 'order-1': ['a'] },
        when: (s) => s.appendToStream('order-1', evs('b'), { expectedVersion: 'no-stream' }),
        then: {
          throws: 'CONCURRENCY',
          streams: { 'order-1': ['a'] },
          log: [['order-1', 'a']],
          check: (_, err) => expect(err).toMatchObject({ stream: 'order-1', actual: 1 }),
        },
      });
      spec("'stream-exists' appends to an existing stream", {
        given: { 'order-1': ['a'] },
        when: (s) => s.appendToStream('order-1', evs('b'), { expectedVersion: 'stream-exists' }),
        then: { streams: { 'order-1': ['a', 'b'] } },
      });
      spec("'stream-exists' on a missing stream is a conflict and writes nothing", {
        when: (s) => s.appendToStream('order-1', evs('a'), { expectedVersion: 'stream-exists' }),
        then: {
          throws: 'CONCURRENCY',
          streams: { 'order-1': [] },
          log: [],
          check: (_, err) => expect(err).toMatchObject({ expectedVersion: 'stream-exists', actual: 0 }),
        },
      });
      spec("'any' appends whatever the stream's version", {
        given: { 'order-1': ['a'] },
        when: async (s) => {
          await s.appendToStream('order-1', evs('b'), { expectedVersion: 'any' });
          await s.appendToStream('order-2', evs('x'), { expectedVersion: 'any' });
        },
        then: { streams: { 'order-1': ['a', 'b'], 'order-2': ['x'] } },
      });
      spec('a number equal to the current version appends; 0 means no stream', {
        given: { 'order-1': ['a', 'b'] },
        when: async (s) => {
          await s.appendToStream('order-1', evs('c'), { expectedVersion: 2 });
          return s.appendToStream('order-2', evs('x'), { expectedVersion: 0 });
        },
        then: { streams: { 'order-1': ['a', 'b', 'c'], 'order-2': ['x'] }, check: (_, r) => expect(r.version).toBe(1) },
      });
      spec('a stale number is a conflict that names both versions and writes nothing', {
        given: { 'order-1': ['a', 'b'] },
        when: (s) => s.appendToStream('order-1', evs('c', 'd'), { expectedVersion: 1 }),
        then: {
          throws: 'CONCURRENCY',
          streams: { 'order-1': ['a', 'b'] },
          check: (_, err) => expect(err).toMatchObject({ stream: 'order-1', expected: 1, actual: 2 }),
        },
      });
      spec('a number ahead of the stream is a conflict', {
        given: { 'order-1': ['a'] },
        when: (s) => s.appendToStream('order-1', evs('b'), { expectedVersion: 5 }),
        then: { throws: 'CONCURRENCY', streams: { 'order-1': ['a'] } },
      });
      spec('of concurrent appends expecting the same version exactly one wins', {
        given: { 'order-1': ['a'] },
        when: async (s) => {
          const tries = await Promise.allSettled(
            Array.from({ length: 6 }, (_, i) => s.appendToStream('order-1', evs(`w${i}`), { expectedVersion: 1 })),
          );
          expect(tries.filter((t) => t.status === 'fulfilled')).toHaveLength(1);
          for (const t of tries)
            if (t.status === 'rejected') expect((t.reason as { code: string }).code).toBe('CONCURRENCY');
        },
        then: { check: async (s) => expect(await s.streamVersion('order-1')).toBe(2) },
      });
      spec('an empty append checks the version and writes nothing', {
        given: { 'order-1': ['a'] },
        when: async (s) => {
          expect(await s.appendToStream('order-1', [], { expectedVersion: 1 })).toMatchObject({
            version: 1,
            lastSeq: 0,
            events: [],
          });
          return s.appendToStream('order-1', [], { expectedVersion: 'no-stream' });
        },
        then: { throws: 'CONCURRENCY', log: [['order-1', 'a']] },
      });
      spec('bad input is a typed error that lists every problem and writes nothing', {
        given: { 'order-1': ['a'] },
        when: (s) =>
          s.appendMany([
            { stream: 'order-1', events: evs('b'), expectedVersion: 1 },
            { stream: '', events: [{ type: '', data: null as never }], expectedVersion: 'sometimes' as never },
          ]),
        then: {
          throws: 'STORE_INPUT',
          log: [['order-1', 'a']],
          check: (_, err) => expect(err.issues.length).toBeGreaterThanOrEqual(4),
        },
      });
      spec(
        'an event time that is not an ISO 8601 string is refused before anything ' +
          'is written, so verify never sees a link hashed from another text',
        {
          given: { 'order-1': ['a'] },
          when: (s) =>
            s.appendMany([
              { stream: 'order-1', events: [{ type: 'b', data: {}, at: 12 as never }], expectedVersion: 1 },
              { stream: 'order-2', events: [{ type: 'x', data: {}, at: 'yesterday' }], expectedVersion: 'no-stream' },
            ]),
          then: {
            throws: 'STORE_INPUT',
            log: [['order-1', 'a']],
            check: (_, err) =>
              expect(err.issues.join('\n')).toMatch(
                /event 0: at must be an ISO 8601 time string, got number[\s\S]*event 0: at must be an ISO 8601 time/,
              ),
          },
        },
      );
    });

    describe('reads', () => {
      spec('readStream takes an inclusive version range; a missing stream reads empty', {
        given: { 'order-1': ['a', 'b', 'c', 'd'] },
        when: async (s) => {
          expect((await collect(s.readStream('order-1', { from: 2, to: 3 }))).map((e) => [e.version, e.type])).toEqual([
            [2, 'b'],
            [3, 'c'],
          ]);
          expect((await collect(s.readStream('order-1', { from: 4 }))).map((e) => e.type)).toEqual(['d']);
          expect(await collect(s.readStream('nobody'))).toEqual([]);
          expect(await s.streamVersion('nobody')).toBe(0);
        },
        then: {},
      });
      spec('readAll follows the global position from an inclusive start, with a bound and a limit', {
        given: { 'order-1': ['a', 'b'], 'order-2': ['x', 'y'], 'order-3': ['z'] },
        when: async (s) => {
          expect(
            (await collect(s.readAll({ from: 2, to: 4 }))).map((e) => [e.seq, e.stream, e.version, e.type]),
          ).toEqual([
            [2, 'order-1', 2, 'b'],
            [3, 'order-2', 1, 'x'],
            [4, 'order-2', 2, 'y'],
          ]);
          expect((await collect(s.readAll({ from: 3, limit: 1 }))).map((e) => e.seq)).toEqual([3]);
          expect(await collect(s.readAll({ from: 6 }))).toEqual([]);
        },
        then: {
          log: [
            ['order-1', 'a'],
            ['order-1', 'b'],
            ['order-2', 'x'],
            ['order-2', 'y'],
            ['order-3', 'z'],
          ],
        },
      });
      spec('events keep their data, meta and time; the clock stamps a missing time; the log holds a copy', {
        when: async (s) => {
          const data = { n: 1, nested: { list: [1, 'two', null], ok: true } };
          const r = await s.appendToStream(
            'order-1',
            [{ type: 'a', data, meta: { by: 'test' }, at: '2026-01-02T03:04:05.000Z' }, ev('b', { n: 2 })],
            { expectedVersion: 'no-stream' },
          );
          data.n = 99; // the caller changing its object later changes nothing stored
          (r.events[0]!.data as { n: number }).n = 98;
          const [a, b] = await collect(s.readStream('order-1'));
          expect(a).toMatchObject({
            seq: 1,
            stream: 'order-1',
            version: 1,
            type: 'a',
            schema: 1,
            data: { n: 1, nested: { list: [1, 'two', null], ok: true } },
            meta: { by: 'test' },
            at: '2026-01-02T03:04:05.000Z',
          });
          expect(b).toMatchObject({ seq: 2, version: 2, type: 'b', data: { n: 2 }, meta: {} });
          expect(Number.isNaN(Date.parse(b!.at))).toBe(false);
        },
        then: {},
      });
    });

    describe('atomic multi-stream appends', () => {
      spec('appendMany commits every request in one step, in request order', {
        when: (s) =>
          s.appendMany([
            { stream: 'order-1', events: evs('a', 'b'), expectedVersion: 'no-stream' },
            { stream: 'order-2', events: evs('x'), expectedVersion: 'no-stream' },
          ]),
        then: {
          log: [
            ['order-1', 'a'],
            ['order-1', 'b'],
            ['order-2', 'x'],
          ],
          check: (_, outcomes: StreamAppendOutcome[]) => {
            expect(outcomes.map((o) => o.ok && [o.result.version, o.result.lastSeq])).toEqual([
              [2, 2],
              [1, 3],
            ]);
          },
        },
      });
      spec('a conflict keeps only its own request out; a later request on the same stream sees an earlier one', {
        given: { 'order-1': ['a'] },
        projections: [counter],
        when: (s) =>
          s.appendMany([
            { stream: 'order-1', events: evs('b'), expectedVersion: 1 },
            { stream: 'order-2', events: evs('x'), expectedVersion: 'stream-exists' }, // conflict: order-2 does not exist
            { stream: 'order-3', events: evs('y', 'z'), expectedVersion: 'no-stream' },
            { stream: 'order-1', events: evs('c'), expectedVersion: 2 },
          ]),
        then: {
          log: [
            ['order-1', 'a'],
            ['order-1', 'b'],
            ['order-3', 'y'],
            ['order-3', 'z'],
            ['order-1', 'c'],
          ],
          check: async (s, outcomes: StreamAppendOutcome[]) => {
            expect(outcomes.map((o) => o.ok)).toEqual([true, false, true, true]);
            const bad = outcomes[1]!;
            expect(!bad.ok && bad.error).toMatchObject({ code: 'CONCURRENCY', stream: 'order-2' });
            expect(await s.projection('counter').get('order-2')).toBeUndefined();
            expect(await s.projection('counter').get('order-1')).toEqual({ count: 3, last: 'c' });
          },
        },
      });
      spec('any other failure in a batch writes nothing: a projection that throws', {
        given: { 'order-1': ['a'] },
        projections: [strict],
        when: (s) =>
          s.appendMany([
            { stream: 'order-1', events: evs('b'), expectedVersion: 1 },
            { stream: 'order-2', events: evs('poison'), expectedVersion: 'no-stream' },
          ]),
        then: {
          throws: 'STORE_PROJECTION',
          log: [['order-1', 'a']],
          check: async (s, err) => {
            expect(String(err.message)).toContain('projection refused poison');
            expect(await s.projection('strict').get('order-1')).toEqual({ n: 1 });
            expect(await s.projection('strict').get('order-2')).toBeUndefined();
          },
        },
      });
      spec('an event JSON cannot encode fails only its own request; the others commit', {
        given: { 'order-1': ['a'] },
        projections: [counter],
        when: (s) => {
          const cycle: Record<string, unknown> = {};
          cycle.self = cycle;
          return s.appendMany([
            { stream: 'order-1', events: evs('b'), expectedVersion: 1 },
            { stream: 'order-2', events: [ev('x', { big: 10n })], expectedVersion: 'no-stream' },
            { stream: 'order-3', events: [ev('y', cycle)], expectedVersion: 'no-stream' },
            { stream: 'order-4', events: evs('z'), expectedVersion: 'no-stream' },
          ]);
        },
        then: {
          log: [
            ['order-1', 'a'],
            ['order-1', 'b'],
            ['order-4', 'z'],
          ],
          check: async (s, outcomes: StreamAppendOutcome[]) => {
            expect(outcomes.map((o) => o.ok)).toEqual([true, false, false, true]);
            expect(outcomes.map((o) => !o.ok && o.error)).toEqual([
              false,
              expect.objectContaining({ code: 'EVENT_NOT_ENCODABLE' }),
              expect.objectContaining({ code: 'EVENT_NOT_ENCODABLE' }),
              false,
            ]);
            expect(outcomes[3]).toMatchObject({ ok: true, result: { version: 1, lastSeq: 3 } });
            expect(await s.projection('counter').get('order-2')).toBeUndefined();
            expect(await s.streamVersion('order-3')).toBe(0);
          },
        },
      });
      spec('appendToStream with an event JSON cannot encode throws EVENT_NOT_ENCODABLE and writes nothing', {
        given: { 'order-1': ['a'] },
        when: (s) => s.appendToStream('order-1', [ev('b'), ev('c', { big: 10n })], { expectedVersion: 1 }),
        then: {
          throws: 'EVENT_NOT_ENCODABLE',
          streams: { 'order-1': ['a'] },
          log: [['order-1', 'a']],
          check: (_, err) => expect(err).toMatchObject({ details: { stream: 'order-1', type: 'c' } }),
        },
      });
    });

    describe('projections run inside the append transaction', () => {
      spec('a registered projection is up to date when the append returns', {
        projections: [counter, items],
        when: async (s) => {
          await s.appendToStream(
            'shop-1',
            [ev('item.added', { id: 'i1', name: 'apple' }), ev('item.added', { id: 'i2', name: 'pear' })],
            { expectedVersion: 'no-stream' },
          );
          await s.appendToStream(
            'shop-1',
            [ev('item.renamed', { id: 'i1', name: 'quince' }), ev('note', {}), ev('item.removed', { id: 'i2' })],
            { expectedVersion: 2 },
          );
        },
        then: {
          check: async (s) => {
            expect(await s.projection('counter').get('shop-1')).toEqual({ count: 5, last: 'item.removed' });
            // canHandle skipped `note`; removed deletes
            expect(await s.projection('items').list()).toEqual([{ id: 'i1', doc: { name: 'quince' } }]);
          },
        },
      });
      spec('a projection that throws rolls the append back', {
        given: { 'order-1': ['a'] },
        projections: [strict],
        when: (s) => s.appendToStream('order-1', evs('b', 'poison'), { expectedVersion: 1 }),
        then: {
          throws: 'STORE_PROJECTION',
          streams: { 'order-1': ['a'] },
          log: [['order-1', 'a']],
          check: async (s, err) => {
            expect(String(err.message)).toContain('projection refused poison');
            expect(await s.projection('strict').get('order-1')).toEqual({ n: 1 });
            await s.appendToStream('order-1', evs('b'), { expectedVersion: 1 }); // the stream is usable afterwards
            expect(await s.projection('strict').get('order-1')).toEqual({ n: 2 });
          },
        },
      });
      spec('rebuilding a projection from the log gives what the appends built', {
        projections: [counter, items],
        given: { 'order-1': ['a', 'b'], 'order-2': ['c'] },
        when: async (s) => {
          await s.appendToStream(
            'shop-1',
            [
              ev('item.added', { id: 'i1', name: 'apple' }),
              ev('item.added', { id: 'i2', name: 'fig' }),
              ev('item.removed', { id: 'i1' }),
            ],
            { expectedVersion: 'no-stream' },
          );
          const before = [await s.projection('counter').list(), await s.projection('items').list()];
          expect(await s.rebuildProjection('counter')).toEqual({ documents: 3, events: 6 });
          expect(await s.rebuildProjection('items')).toEqual({ documents: 1, events: 6 });
          expect([await s.projection('counter').list(), await s.projection('items').list()]).toEqual(before);
        },
        then: {},
      });
      spec('an unknown projection is a typed error', {
        projections: [counter],
        when: async (s) => s.projection('nope').get('x'),
        then: { throws: 'STORE_UNKNOWN_PROJECTION' },
      });
    });

    describe('upcasting on read', () => {
      // price.set@1 had { cents }, @2 has { amount: { cents, currency } }.
      const upcasters = (): UpcasterRegistry =>
        new UpcasterRegistry().register({
          type: 'price.set',
          fromSchema: 1,
          up: (d) => ({ amount: { cents: d.cents, currency: 'EUR' } }),
        });
      const seen: RecordedEvent[] = [];
      const prices: Projection<{ currency: string }> = {
        name: 'prices',
        evolve: (_d, e) => (seen.push(e), { currency: String((e.data.amount as { currency: string }).currency) }),
      };
      spec('an old event reads at the current schema everywhere: streams, the log, subscriptions and projections', {
        upcasters: upcasters(),
        projections: [prices],
        when: async (s) => {
          seen.length = 0;
          const r = await s.appendToStream(
            'item-1',
            [
              { type: 'price.set', schema: 1, data: { cents: 250 } },
              { type: 'price.set', data: { amount: { cents: 300, currency: 'USD' } } },
            ],
            { expectedVersion: 'no-stream' },
          );
          const want = [
            { schema: 2, data: { amount: { cents: 250, currency: 'EUR' } } },
            { schema: 2, data: { amount: { cents: 300, currency: 'USD' } } },
          ];
          expect(r.events).toMatchObject(want);
          expect(await collect(s.readStream('item-1'))).toMatchObject(want);
          expect(await collect(s.readAll())).toMatchObject(want);
          expect(seen).toMatchObject(want);
          expect(await s.projection('prices').get('item-1')).toEqual({ currency: 'USD' });
          const got: RecordedEvent[] = [];
          const sub = s.subscribe({ from: 1, pollMs: 20 }, (e) => void got.push(e));
          await until(() => got.length === 2, 'two upcast events');
          await sub.close();
          expect(got).toMatchObject(want);
        },
        then: {},
      });
    });

    describe('subscriptions', () => {
      spec('a subscription sees every event exactly once, in global order, across concurrent appends', {
        given: { 'order-0': ['a', 'b'] },
        when: async (s) => {
          const got: RecordedEvent[] = [];
          const sub = s.subscribe({ from: 1, pollMs: 20 }, async (e) => {
            got.push(e);
            if (e.seq % 7 === 0) await new Promise((r) => setTimeout(r, 1)); // a slow handler holds the next event back
          });
          // 40 appends from concurrent callers, single and batched.
          await Promise.all(
            Array.from({ length: 20 }, async (_, i) => {
              await s.appendToStream(`order-${i + 1}`, evs('x', 'y'), { expectedVersion: 'no-stream' });
              await s.appendMany([
                { stream: `order-${i + 1}`, events: evs('z'), expectedVersion: 2 },
                { stream: `other-${i}`, events: evs('w'), expectedVersion: 'any' },
              ]);
            }),
          );
          const total = await s.lastSeq();
          expect(total).toBe(2 + 20 * 4);
          await until(() => got.length >= total, `${total} events delivered`);
          await new Promise((r) => setTimeout(r, 60)); // a few more polls: nothing is delivered twice
          await sub.close();
          expect(got.map((e) => e.seq)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
          expect(got.map((e) => [e.stream, e.version, e.type])).toEqual(
            (await collect(s.readAll())).map((e) => [e.stream, e.version, e.type]),
          );
          expect(sub.position).toBe(total);
        },
        then: {},
      });
      spec('a subscription starts at an inclusive position', {
        given: { 'order-1': ['a', 'b', 'c'] },
        when: async (s) => {
          const got: number[] = [];
          const sub = s.subscribe({ from: 2, pollMs: 20 }, (e) => void got.push(e.seq));
          await s.appendToStream('order-1', evs('d'), { expectedVersion: 3 });
          await until(() => got.length === 3, 'positions 2..4');
          await sub.close();
          expect(got).toEqual([2, 3, 4]);
        },
        then: {},
      });
      spec('a handler that throws stops the subscription at that event; resuming from its position skips nothing', {
        given: { 'order-1': ['a', 'b', 'c'] },
        when: async (s) => {
          const got: number[] = [];
          let failed: unknown;
          const sub = s.subscribe({ from: 1, pollMs: 20, onError: (err) => (failed = err) }, (e) => {
            if (e.seq === 2) throw new Error('handler failed on 2');
            got.push(e.seq);
          });
          await until(() => failed !== undefined, 'the handler error');
          expect(String((failed as Error).message)).toBe('handler failed on 2');
          expect(got).toEqual([1]);
          expect(sub.position).toBe(1);
          await sub.close();
          const again: number[] = [];
          const resumed = s.subscribe({ from: sub.position + 1, pollMs: 20 }, (e) => void again.push(e.seq));
          await until(() => again.length === 2, 'positions 2..3');
          await resumed.close();
          expect(again).toEqual([2, 3]);
        },
        then: {},
      });
      if (h.second) {
        const second = h.second;
        spec('a subscription on a second handle sees the first handle’s appends, and projections are shared', {
          projections: [counter],
          when: async (s) => {
            const other = await second(s, { projections: [counter] });
            try {
              const got: number[] = [];
              const sub = other.subscribe({ from: 1, pollMs: 20 }, (e) => void got.push(e.seq));
              await s.appendToStream('order-1', evs('a'), { expectedVersion: 'no-stream' });
              await other.appendToStream('order-1', evs('b'), { expectedVersion: 1 });
              await s.appendToStream('order-1', evs('c'), { expectedVersion: 2 });
              await until(() => got.length === 3, 'three events on the second handle');
              await sub.close();
              expect(got).toEqual([1, 2, 3]);
              expect(await s.projection('counter').get('order-1')).toEqual({ count: 3, last: 'c' });
              expect(await other.projection('counter').get('order-1')).toEqual({ count: 3, last: 'c' });
              // A stale handle's append is a conflict, not a lost write.
              expect((await errorOf(other.appendToStream('order-1', evs('d'), { expectedVersion: 2 }))).code).toBe(
                'CONCURRENCY',
              );
            } finally {
              await other.close();
            }
          },
          then: { streams: { 'order-1': ['a', 'b', 'c'] } },
        });
      }
    });

    hostContract(h, spec);
  });
}
