// The wire of a remote `logs --follow` (domain/follow-frames.ts): frames cut into NOTIFY-sized packets and put
// back together in order, a missing or reordered packet seen as a gap, anything else ignored and counted.
import { describe, expect, it } from 'vitest';
import {
  decodeControl,
  encodeControl,
  encodeFrame,
  FrameReader,
  MAX_PAYLOAD_BYTES,
  type FollowFrame,
} from '../../../src/domain/follow-frames.ts';

const line = (n: number, text = `line ${n}`) => ({
  stream: 'stdout' as const,
  line: text,
  at: `2026-12-02T00:00:${String(n % 60).padStart(2, '0')}.000Z`,
});
const bytes = (s: string) => Buffer.byteLength(s);

describe('follow frames', () => {
  it('a small frame is one packet; a large one is cut below the NOTIFY limit and read back whole', () => {
    expect(encodeFrame({ t: 'hb' }, 0)).toHaveLength(1);
    // Long lines of multi-byte characters, quotes and control characters that JSON escapes (up to 6 bytes each),
    // and astral characters (surrogate pairs, never cut in two).
    const lines = Array.from({ length: 40 }, (_, n) => line(n, `é"\\\u0001😀 `.repeat(300) + n));
    const frame: FollowFrame = { t: 'lines', lines };
    const packets = encodeFrame(frame, 0);
    expect(packets.length).toBeGreaterThan(10);
    for (const p of packets) expect(bytes(p)).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES);
    expect(packets.every((p) => !/\\ud83d"/i.test(p))).toBe(true);
    const r = new FrameReader();
    for (const p of packets.slice(0, -1)) expect(r.push(p)).toEqual({ kind: 'partial' });
    expect(r.push(packets.at(-1)!)).toEqual({ kind: 'frame', frame });
    // The next frame continues the numbering.
    const next = encodeFrame({ t: 'lines', lines: [line(1, 'x'.repeat(30_000))] }, packets.length, 8000);
    expect(next.length).toBeGreaterThan(3);
    let last;
    for (const p of next) last = r.push(p);
    expect(last).toMatchObject({ kind: 'frame', frame: { t: 'lines', lines: [{ line: 'x'.repeat(30_000) }] } });
    expect(r.bad).toBe(0);
  });

  it('a missing packet, a repeated one or one out of order is a gap', () => {
    const a = encodeFrame({ t: 'lines', lines: [line(1)] }, 0);
    const b = encodeFrame({ t: 'hb' }, 1);
    const c = encodeFrame({ t: 'lines', lines: [line(2)] }, 2);
    const skip = new FrameReader();
    expect(skip.push(a[0]!)).toMatchObject({ kind: 'frame' });
    expect(skip.push(c[0]!)).toEqual({ kind: 'gap', expected: 1, got: 2 });
    const twice = new FrameReader();
    twice.push(a[0]!);
    twice.push(b[0]!);
    expect(twice.push(b[0]!)).toEqual({ kind: 'gap', expected: 2, got: 1 });
    // A part of a cut frame lost: the next part's sequence does not follow.
    const big = encodeFrame({ t: 'lines', lines: [line(3, 'y'.repeat(20_000))] }, 0);
    const part = new FrameReader();
    part.push(big[0]!);
    expect(part.push(big[2]!)).toEqual({ kind: 'gap', expected: 1, got: 2 });
  });

  it('payloads that are not ours are ignored and counted, never thrown', () => {
    const r = new FrameReader();
    for (const p of ['', 'not json', '[]', '{"s":0}', '{"s":0,"i":0,"n":0,"d":""}', '{"s":0,"i":3,"n":2,"d":""}'])
      expect(r.push(p)).toEqual({ kind: 'bad' });
    // A whole packet whose frame does not check (unknown type, a line without a stream).
    expect(r.push(JSON.stringify({ s: 0, i: 0, n: 1, d: '{"t":"nope"}' }))).toEqual({ kind: 'bad' });
    expect(r.push(JSON.stringify({ s: 1, i: 0, n: 1, d: '{"t":"lines","lines":[{"line":"x"}]}' }))).toEqual({
      kind: 'bad',
    });
    expect(r.bad).toBe(8);
    expect(r.push(encodeFrame({ t: 'end', reason: 'exited' }, 2)[0]!)).toEqual({
      kind: 'frame',
      frame: { t: 'end', reason: 'exited' },
    });
  });

  it('control messages: open, renew and cancel round-trip; anything else is null', () => {
    const followId = 'a'.repeat(32);
    for (const m of [
      { t: 'open', followId, instanceId: 'inst_01', from: 'node-b' },
      { t: 'renew', followId },
      { t: 'cancel', followId },
    ] as const)
      expect(decodeControl(encodeControl(m))).toEqual(m);
    for (const p of [
      'x',
      '{}',
      JSON.stringify({ t: 'renew', followId: 'short' }),
      JSON.stringify({ t: 'open', followId, instanceId: 'a b', from: 'b' }),
      JSON.stringify({ t: 'open', followId, instanceId: 'i', from: '' }),
      JSON.stringify({ t: 'boom', followId }),
    ])
      expect(decodeControl(p)).toBeNull();
  });
});
