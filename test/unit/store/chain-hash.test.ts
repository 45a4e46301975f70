// The hash chain's links (src/store/chain.ts) stay byte for byte what they have always been: logs already written,
// the archives made from them and PostgreSQL's append_events (which computes the same link in SQL) must all keep
// verifying. The link is checked against its definition (sha256 of the previous hash, then the JSON header and the
// two JSON texts) and against values pinned when it was defined.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { GENESIS, eventHash } from '../../../src/store/chain.ts';

type Link = [
  seq: number,
  stream: string,
  version: number,
  type: string,
  schema: number,
  at: string,
  data: string,
  meta: string,
];

/** The link as chain.ts defines it, in its plainest form. */
const definition = (prev: Uint8Array, [seq, stream, version, type, schema, at, data, meta]: Link): Buffer =>
  createHash('sha256')
    .update(prev)
    .update(`${JSON.stringify([seq, stream, version, type, schema, at, data.length])}\n${data}\n${meta}`)
    .digest();

const AT = '2026-01-01T00:00:00.000Z';
const PINNED: [Link, string][] = [
  [
    [1, 'instance-a', 1, 'instance.spawned', 1, AT, '{"pid":4242}', '{}'],
    'c06ace2ce8be41692e69373c788187a5daf8619156ad7a6f870a2816398d9373',
  ],
  [
    [2, 'stréam-ü', 7, 'type "quoted"\\', 3, 'at\n', '{"x":"é€😀"}', '{"by":"ü"}'],
    'ba80c8ed74a04f83568b68c50ad4296e47add1bc7ebe55e8e7ee338cfbc2fe5a',
  ],
  [
    [3, 'lone\ud800x', 2, 'tab\t', 1, 'z', '"\ud800"', '{}'],
    'ba4aa15971b5f69a1e66915668917d472b2ca8b4ab8e059e888b1d09f7d1050a',
  ],
  [
    [4, 's', 1, 't', 1, 'a', JSON.stringify({ big: 'x€'.repeat(50_000) }), '{}'],
    '5d72eedb04d70b59696468d37ca76ffa724082f61ac3b5f6f546f5dfd3f6b96e',
  ],
  [[5, 's', 1, 't', 1, 'a', '', ''], '84784613b3f034d810116dae2d1e42f09609e0e9f9527cfa60bad3fda1cb5463'],
];

describe('eventHash', () => {
  it('gives the links pinned when the chain was defined', () => {
    let prev: Buffer = GENESIS;
    for (const [link, hex] of PINNED) {
      prev = eventHash(prev, ...link);
      expect(prev.toString('hex')).toBe(hex);
    }
  });

  it('is its definition for any event, in any order of calls, at any size', () => {
    const streams = ['instance-a', 'instance-b', 'ex"ec\\-é', 'lone\udc00', ''];
    const types = ['instance.spawned', 'x.y', 'ünï', '\u0001ctl'];
    const ats = [AT, '2026-01-01T00:00:00.001Z', 'not a time', ''];
    const texts = [
      '{}',
      '{"pid":4242,"host":"127.0.0.1"}',
      JSON.stringify({ s: 'é€😀\u2028' }),
      '"\ud800"',
      JSON.stringify({ big: 'y'.repeat(21_800) }), // around where the reused buffer gives way
      JSON.stringify({ big: '€'.repeat(21_800) }),
      JSON.stringify({ big: 'z'.repeat(200_000) }),
    ];
    let ours: Buffer = GENESIS;
    let theirs: Buffer = GENESIS;
    for (let i = 0; i < 400; i++) {
      const link: Link = [
        i + 1,
        streams[(i * 7) % streams.length]!,
        (i % 13) + 1,
        types[i % types.length]!,
        (i % 3) + 1,
        ats[(i >> 2) % ats.length]!,
        texts[(i * 5) % texts.length]!,
        texts[(i * 3) % 4]!,
      ];
      ours = eventHash(ours, ...link);
      theirs = definition(theirs, link);
      expect(ours.equals(theirs), `link ${i}`).toBe(true);
    }
  });

  it('encodes header values of another type as JSON.stringify does (a damaged row holds anything)', () => {
    const odd: Link[] = [
      [1, 's', 1, 't', Number.NaN, AT, '{}', '{}'],
      [Number.POSITIVE_INFINITY, 's', -0, 't', 1.5, AT, '{}', '{}'],
      [1, 's', 1, 't', '2' as unknown as number, AT, '{}', '{}'],
      [1, 's', 1, 't', 1, null as unknown as string, '{}', '{}'],
      [1, 's', 1, 't', 1, 12 as unknown as string, '{}', '{}'],
      [1, 7 as unknown as string, 1, 't', 1, AT, '{}', '{}'],
    ];
    for (const link of odd) expect(eventHash(GENESIS, ...link).equals(definition(GENESIS, link))).toBe(true);
    const short = Buffer.from([1, 2, 3]);
    expect(eventHash(short, ...PINNED[0]![0]).equals(definition(short, PINNED[0]![0]))).toBe(true);
  });
});
