import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_EVENT_DEPTH } from '../../../src/domain/json-input.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { tempDir } from '../../support/tmp.ts';

function deep(levels: number): unknown {
  const top: unknown[] = [];
  let cur = top;
  for (let i = 1; i < levels; i++) cur.push((cur = []));
  return top;
}

describe('SqliteEventStore: events JSON cannot encode', () => {
  it('append refuses a BigInt, a cycle or a too-deep value with EVENT_NOT_ENCODABLE and writes nothing', () => {
    const s = new SqliteEventStore(join(tempDir(), 'log.db'));
    const cyclic: Record<string, unknown> = {};
    cyclic.me = cyclic;
    for (const data of [{ n: 1n }, cyclic, { d: deep(20_000) }]) {
      expect(() =>
        s.append('x-1', [{ type: 't', data: data as Record<string, unknown> }], { expectedVersion: 'any' }),
      ).toThrow(expect.objectContaining({ code: 'EVENT_NOT_ENCODABLE' }));
    }
    expect(s.lastSeq()).toBe(0);
    s.close();
  });

  it('bounds the nesting itself, the same on every Node line: one level past MAX_EVENT_DEPTH is refused, the bound is kept', () => {
    const s = new SqliteEventStore(join(tempDir(), 'log.db'));
    // data is one level itself: { d: deep(n) } nests n + 1 levels.
    for (const levels of [MAX_EVENT_DEPTH, 20_000, 1_000_000]) {
      expect(() => s.append('x-1', [{ type: 't', data: { d: deep(levels) } }], { expectedVersion: 'any' })).toThrow(
        expect.objectContaining({
          code: 'EVENT_NOT_ENCODABLE',
          message: `event t for x-1 cannot be encoded as JSON (nested deeper than ${MAX_EVENT_DEPTH} levels); nothing was appended`,
        }),
      );
    }
    expect(() =>
      s.append('x-1', [{ type: 't', data: {}, meta: { d: deep(MAX_EVENT_DEPTH) } }], { expectedVersion: 'any' }),
    ).toThrow(/nested deeper than/);
    expect(s.lastSeq()).toBe(0);
    const kept = { d: deep(MAX_EVENT_DEPTH - 1) };
    s.append('x-1', [{ type: 't', data: kept }], { expectedVersion: 'no-stream' });
    expect(s.read('x-1')[0]!.data).toEqual(kept);
    s.close();
  });

  it('appendMany: a request that cannot be encoded fails alone; the rest of the batch commits', () => {
    const s = new SqliteEventStore(join(tempDir(), 'log.db'));
    const outcomes = s.appendMany([
      { stream: 'a-1', events: [{ type: 't', data: { ok: 1 } }], options: { expectedVersion: 'no-stream' } },
      {
        stream: 'b-1',
        events: [{ type: 't', data: { bad: 2n } as Record<string, unknown> }],
        options: { expectedVersion: 'no-stream' },
      },
      {
        stream: 'c-1',
        events: [
          { type: 't', data: { ok: 3 } },
          { type: 'u', data: { d: deep(20_000) } as Record<string, unknown> },
        ],
        options: { expectedVersion: 'no-stream' },
      },
      { stream: 'd-1', events: [{ type: 't', data: { ok: 4 } }], options: { expectedVersion: 'no-stream' } },
    ]);
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, false, true]);
    expect(outcomes.filter((o) => !o.ok).map((o) => (o as unknown as { error: { code: string } }).error.code)).toEqual([
      'EVENT_NOT_ENCODABLE',
      'EVENT_NOT_ENCODABLE',
    ]);
    expect(s.read('a-1').map((e) => e.data)).toEqual([{ ok: 1 }]);
    expect(s.read('d-1').map((e) => e.data)).toEqual([{ ok: 4 }]);
    expect(s.streamVersion('b-1')).toBe(0);
    expect(s.streamVersion('c-1')).toBe(0); // all of a request, or none of it
    expect(s.lastSeq()).toBe(2);
    s.close();
  });
});
