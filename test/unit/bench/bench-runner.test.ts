import { describe, expect, it } from 'vitest';
import {
  interleavedRounds,
  sideBySide,
  sizes,
  type Bench,
  type BenchResult,
  type RunOptions,
} from '../../../bench/harness.ts';
import { parseBenchArgs, runBenches, type BenchArgs } from '../../../bench/runner.ts';

/** A bench that records what it was run with and answers `result` (or throws it). */
function fake(name: string, result: BenchResult | Error, seen: RunOptions[] = []): Bench {
  return {
    name,
    run: async (opts) => {
      seen.push(opts);
      if (result instanceof Error) throw result;
      return result;
    },
  };
}

async function run(benches: Bench[], args: Partial<BenchArgs>) {
  let out = '';
  let err = '';
  const code = await runBenches(
    benches,
    { json: false, smoke: false, rounds: 5, prefixes: [], ...args },
    { out: (t) => (out += t), err: (t) => (err += t) },
  );
  return { code, out, err };
}

describe('npm run bench arguments', () => {
  it('--smoke runs one round and says so to every bench', () => {
    expect(parseBenchArgs(['--smoke', '--json'])).toEqual({
      ok: true,
      args: { json: true, smoke: true, rounds: 1, prefixes: [] },
    });
    expect(parseBenchArgs(['exec', '--rounds', '3'])).toEqual({
      ok: true,
      args: { json: false, smoke: false, rounds: 3, prefixes: ['exec'] },
    });
    expect(parseBenchArgs([])).toEqual({ ok: true, args: { json: false, smoke: false, rounds: 5, prefixes: [] } });
  });

  it('refuses what it cannot honour, every problem at once', () => {
    const r = parseBenchArgs(['--smoke', '--rounds', '3', '--fast']);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.message).toMatch(/--smoke runs one round/);
    expect(!r.ok && r.message).toMatch(/unknown option --fast/);
    expect(parseBenchArgs(['--rounds', 'x'])).toEqual({
      ok: false,
      message: '--rounds takes a positive integer, not "x"',
    });
  });
});

describe('a bench run', () => {
  const good = (name: string) => sideBySide(name, 'ms', 2, 1);

  it('runs every bench in a smoke run once, on its small sizes, and prints one JSON entry per result, with its notes', async () => {
    const seen: RunOptions[] = [];
    const withAlso = { ...good('b'), also: [good('b.p95')] };
    const targeted = sideBySide('a', 'ms', 2, 1, { target: '≤ 2×' });
    const r = await run([fake('a', targeted, seen), fake('b', withAlso, seen)], {
      smoke: true,
      rounds: 1,
      json: true,
    });
    expect(r.code).toBe(0);
    expect(seen.map((o) => [o.rounds, o.smoke])).toEqual([
      [1, true],
      [1, true],
    ]);
    expect(sizes(seen[0]!, { full: 1000, smoke: 10 })).toBe(10);
    expect(JSON.parse(r.out)).toEqual([
      { name: 'a', value: 2, unit: 'ms', baseline: 1, ratio: 2, notes: { target: '≤ 2×' } },
      { name: 'b', value: 2, unit: 'ms', baseline: 1, ratio: 2 },
      { name: 'b.p95', value: 2, unit: 'ms', baseline: 1, ratio: 2 },
    ]);
  });

  it('fails, naming the bench, when one throws; the others still run', async () => {
    const seen: RunOptions[] = [];
    const r = await run([fake('a', new Error('no PDS'), seen), fake('b', good('b'), seen)], {
      smoke: true,
      rounds: 1,
      json: true,
    });
    expect(r.code).toBe(1);
    expect(seen).toHaveLength(2);
    expect(r.err).toContain('a failed: no PDS');
    expect(r.err).toMatch(/failed: a$/m);
    expect(JSON.parse(r.out)).toEqual([{ name: 'b', value: 2, unit: 'ms', baseline: 1, ratio: 2 }]);
  });

  it('fails when a value, baseline or ratio is not a finite number, in any entry', async () => {
    const nan = { ...good('a'), also: [sideBySide('a.extract', 'ms', 2, Number.NaN)] };
    const zero = sideBySide('b', 'ms', 2, 0);
    const missing = { name: 'c', unit: 'ms', value: 1, baseline: 1 } as unknown as BenchResult;
    const r = await run([fake('a', nan), fake('b', zero), fake('c', missing), fake('d', good('d'))], {
      smoke: true,
      rounds: 1,
    });
    expect(r.code).toBe(1);
    expect(r.err).toContain('a.extract: baseline is NaN, not a finite number');
    expect(r.err).toContain('b: ratio is Infinity, not a finite number');
    expect(r.err).toContain('c: ratio is undefined, not a finite number');
    expect(r.err).toMatch(/failed: a, b, c$/m);
    expect(r.out).toMatch(/^d\s/);
  });
});

describe('interleaved rounds', () => {
  it('alternates which side goes first, and gives each round the median of its calls per side', async () => {
    const order: string[] = [];
    let n = 0;
    const seen: [number, number, number][] = [];
    const got = await interleavedRounds(
      2,
      3,
      {
        ours: async () => (order.push('o'), ++n),
        theirs: async () => (order.push('t'), 100 + ++n),
      },
      (r, o, t) => seen.push([r, o, t]),
    );
    expect(order.join('')).toBe('to' + 'ot' + 'to' + 'ot' + 'to' + 'ot');
    // Round 1: ours 2, 3, 6 (median 3); theirs 101, 104, 105 (median 104).
    expect(got).toEqual({ ours: [3, 10], theirs: [104, 109] });
    expect(seen).toEqual([
      [1, 3, 104],
      [2, 10, 109],
    ]);
  });
});
