// The CLI's main run in this process with its output captured: what a command prints and the code it exits with,
// with no process start-up (cli.ts runs the CLI as a process; cli-many.ts runs several command lines in one).
import { main } from '../../src/cli/main.ts';
import type { Io } from '../../src/cli/output.ts';

export interface Captured {
  out: string[];
  err: string[];
  /** Every line of both, in the order they were written. */
  lines: string[];
  /** What main takes to build its Io: lines go to `out` and `err` (and both to `lines`). */
  factory: (json: boolean) => Io;
  stdout(): string;
  stderr(): string;
  /** Both streams, interleaved as written. */
  text(): string;
}

/** An Io factory that collects what a command prints (for `main(args, c.factory)` and the server's CLI entry points). */
export function capture(): Captured {
  const out: string[] = [];
  const err: string[] = [];
  const lines: string[] = [];
  const factory = (json: boolean): Io => ({
    out: (t) => {
      out.push(t);
      lines.push(t);
    },
    err: (t) => {
      err.push(t);
      lines.push(t);
    },
    json,
  });
  return {
    out,
    err,
    lines,
    factory,
    stdout: () => out.join('\n'),
    stderr: () => err.join('\n'),
    text: () => lines.join('\n'),
  };
}

/** `runlog <args>` in this process: its exit code and what it printed. */
export async function runCli(args: string[]): Promise<Captured & { code: number }> {
  const c = capture();
  const code = await main(args, c.factory);
  return { code, ...c };
}
