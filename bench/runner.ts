// Runs the chosen benchmarks one after the other and reports them: a table, or one JSON array with --json (stdout;
// progress on stderr). A bench that throws, or returns a value, baseline or ratio that is not a finite number (in
// any entry, `also` included), fails the run, named; the others still run. `--smoke` runs each once on its small
// sizes: it proves every bench works, it judges no ratio.
import { resultProblems, type Bench, type BenchResult } from './harness.ts';

export interface BenchArgs {
  json: boolean;
  smoke: boolean;
  rounds: number;
  /** Run only benchmarks whose name starts with one of these (all when empty). */
  prefixes: string[];
}

export interface BenchIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

const DEFAULT_ROUNDS = 5;

/** `[<prefix>…] [--json] [--smoke] [--rounds N]`, or what is wrong with them. */
export function parseBenchArgs(
  argv: readonly string[],
): { ok: true; args: BenchArgs } | { ok: false; message: string } {
  const problems: string[] = [];
  const prefixes: string[] = [];
  let json = false;
  let smoke = false;
  let rounds: number | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--json') json = true;
    else if (a === '--smoke') smoke = true;
    else if (a === '--rounds') {
      const n = Number(argv[++i]);
      if (!Number.isInteger(n) || n < 1)
        problems.push(`--rounds takes a positive integer, not ${JSON.stringify(argv[i] ?? '')}`);
      else rounds = n;
    } else if (a.startsWith('--')) problems.push(`unknown option ${a}`);
    else prefixes.push(a);
  }
  if (smoke && rounds !== undefined) problems.push('--smoke runs one round: leave --rounds out');
  if (problems.length > 0) return { ok: false, message: problems.join('; ') };
  return { ok: true, args: { json, smoke, rounds: smoke ? 1 : (rounds ?? DEFAULT_ROUNDS), prefixes } };
}

const row = (r: BenchResult): string => {
  const notes = r.notes
    ? `  ${Object.entries(r.notes)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`
    : '';
  return (
    `${r.name.padEnd(20)} ${String(r.value).padStart(12)} ${r.unit.padEnd(9)} ` +
    `raw ${String(r.baseline).padStart(12)}  ratio ${r.ratio}${notes}\n`
  );
};

/** Runs the benches `args` choose; the exit code: 0, 1 when one failed, 2 when none matches. */
export async function runBenches(benches: readonly Bench[], args: BenchArgs, io: BenchIo): Promise<number> {
  const { json, smoke, rounds, prefixes } = args;
  const chosen = benches.filter((b) => prefixes.length === 0 || prefixes.some((p) => b.name.startsWith(p)));
  if (chosen.length === 0) {
    io.err(`no benchmark matches ${prefixes.join(', ')}; known: ${benches.map((b) => b.name).join(', ')}\n`);
    return 2;
  }
  const log = (m: string) => io.err(`[bench] ${m}\n`);
  const results: BenchResult[] = [];
  const failed: string[] = [];
  for (const b of chosen) {
    log(`${b.name} (${smoke ? 'smoke: 1 round, small sizes' : `${rounds} rounds`})…`);
    try {
      const first = await b.run({ rounds, log, smoke });
      const problems = resultProblems(first);
      if (problems.length > 0) throw new Error(`it returned no usable figure: ${problems.join('; ')}`);
      for (const r of [first, ...(first.also ?? [])]) {
        results.push(r);
        if (!json) io.out(row(r));
      }
    } catch (err) {
      failed.push(b.name);
      log(
        `${b.name} failed: ${err instanceof Error ? err.message : String(err)}${b.needs ? ` (needs ${b.needs}; run npm run setup)` : ''}`,
      );
    }
  }
  if (json)
    // Each result's notes (its target among them) go with it: the benchmark results page shows the targets.
    io.out(
      `${JSON.stringify(
        results.map(({ name, value, unit, baseline, ratio, notes }) => ({
          name,
          value,
          unit,
          baseline,
          ratio,
          ...(notes ? { notes } : {}),
        })),
      )}\n`,
    );
  if (smoke)
    log(
      `smoke: ${chosen.length - failed.length} of ${chosen.length} benchmarks ran ` +
        `(${results.length} results)${failed.length ? `; failed: ${failed.join(', ')}` : ''}`,
    );
  else if (failed.length > 0) log(`failed: ${failed.join(', ')}`);
  return failed.length > 0 ? 1 : 0;
}
