// Side-by-side benchmarks: each measures runlog and the raw primitive doing the same work in the
// same run, several rounds, and reports medians and the ratio runlog ÷ raw.

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export interface BenchResult {
  name: string;
  value: number;
  unit: string;
  baseline: number;
  ratio: number;
  /** Extra figures (per-step breakdowns), printed but not part of the JSON contract's required keys. */
  notes?: Record<string, number | string>;
  /** Further entries measured by the same run (e.g. `<name>.p95` beside the median), printed as their own rows. */
  also?: BenchResult[];
}

/** What a bench is run with. */
export interface RunOptions {
  rounds: number;
  log: (msg: string) => void;
  /**
   * A smoke run (`--smoke`): one round on the bench's small sizes (see `sizes`). It proves the bench still works
   * end to end; its figures judge nothing.
   */
  smoke: boolean;
}

export interface Bench {
  name: string;
  /** What it needs (for the error when a part is missing). */
  needs?: string;
  run(opts: RunOptions): Promise<BenchResult>;
}

/**
 * The sizes a bench runs at: `full` for a measurement, `smoke` (small logs, few actors, few calls) for `--smoke`.
 * Each bench calls it once, at the top of its run, so what a smoke run shrinks is in one visible place.
 */
export function sizes<T>(opts: Pick<RunOptions, 'smoke'>, choice: { full: T; smoke: T }): T {
  return opts.smoke ? choice.smoke : choice.full;
}

/**
 * What is wrong with a result, for every entry it carries (`also` included): a value, baseline or ratio that is
 * not a finite number means the bench measured nothing, whatever it printed.
 */
export function resultProblems(result: BenchResult): string[] {
  const problems: string[] = [];
  for (const r of [result, ...(result.also ?? [])]) {
    for (const key of ['value', 'baseline', 'ratio'] as const) {
      const x: unknown = r[key];
      if (typeof x !== 'number' || !Number.isFinite(x))
        problems.push(
          `${r.name}: ${key} is ${typeof x === 'number' ? String(x) : (JSON.stringify(x) ?? 'undefined')}, not a finite number`,
        );
    }
  }
  return problems;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The q-quantile (0..1) by the nearest-rank method: p95 of 15 samples is the 15th. */
export function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

export const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** Times fn; returns milliseconds. */
export async function timeIt(fn: () => unknown): Promise<number> {
  const t0 = nowMs();
  await fn();
  return nowMs() - t0;
}

export const round = (x: number, digits = 3): number => Number(x.toPrecision(digits));

/**
 * rl.close(), bounded: a failed round must not hang the whole benchmark run on a supervisor that will not
 * close (close() waits for running effects).
 */
export async function closeWithin(rl: { close(): Promise<void> } | null | undefined, ms = 30_000): Promise<boolean> {
  if (!rl) return true;
  let timer: NodeJS.Timeout | undefined;
  const closed = await Promise.race([
    rl.close().then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms))),
  ]);
  clearTimeout(timer);
  return closed;
}

/** The garbage collector, made callable from inside this process (heap benches measure what stays reachable). */
export function collector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** Heap in use after two full collections (the second frees what the first's finalizers released), in MB. */
export function heapMb(gc: () => void): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed / (1024 * 1024);
}

/**
 * Heap held by what `open` returns (kept alive until measured), above the heap before it; `count` says how many
 * events it holds. A function of its own so that nothing of one measurement stays reachable into the next (a value
 * kept in a loop's scope lives on until it is overwritten, after the next one is allocated).
 */
export async function held<T>(
  gc: () => void,
  open: () => Promise<T>,
  count: (x: T) => number,
  close: (x: T) => Promise<void>,
): Promise<{ mb: number; n: number }> {
  const before = heapMb(gc);
  const x = await open();
  const after = heapMb(gc);
  const n = count(x);
  await close(x);
  return { mb: after - before, n };
}

/**
 * A side-by-side result as every bench reports it: value and baseline rounded, ratio = value ÷ baseline (from the
 * unrounded figures). The JSON contract's keys, in its order; notes only when there are some.
 */
export function sideBySide(
  name: string,
  unit: string,
  value: number,
  baseline: number,
  notes?: BenchResult['notes'],
): BenchResult {
  return {
    name,
    value: round(value),
    unit,
    baseline: round(baseline),
    ratio: round(value / baseline),
    ...(notes ? { notes } : {}),
  };
}

/**
 * Rounds of calls to both sides, interleaved (which side goes first alternates, so neither always runs on a daemon
 * the other just warmed or loaded): each round's figure per side is the median of its `perRound` calls.
 */
export async function interleavedRounds(
  rounds: number,
  perRound: number,
  sides: { ours: () => Promise<number>; theirs: () => Promise<number> },
  onRound?: (round: number, ours: number, theirs: number) => void,
): Promise<{ ours: number[]; theirs: number[] }> {
  const ours: number[] = [];
  const theirs: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const o: number[] = [];
    const t: number[] = [];
    for (let k = 0; k < perRound; k++) {
      if ((r + k) % 2) {
        o.push(await sides.ours());
        t.push(await sides.theirs());
      } else {
        t.push(await sides.theirs());
        o.push(await sides.ours());
      }
    }
    ours.push(median(o));
    theirs.push(median(t));
    onRound?.(r + 1, ours.at(-1)!, theirs.at(-1)!);
  }
  return { ours, theirs };
}
