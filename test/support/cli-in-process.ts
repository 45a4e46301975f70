// The CLI's main run in this process with its output captured: what a command prints and the code it exits with,
// with no process start-up (cli.ts runs the CLI as a process; cli-many.ts runs several command lines in one).
import { main } from '../../src/cli/main.ts';
import type { Io } from '../../src/cli/output.ts';

export interface Captured {
  out: string[];
  err: string[];
  /** What main takes to build its Io: lines go to `out` and `err`. */
  factory: (json: boolean) => Io;
  stdout(): string;
  stderr(): string;
}

export function capture(): Captured {
  const out: string[] = [];
  const err: string[] = [];
  const factory = (json: boolean): Io => ({ out: (t) => out.push(t), err: (t) => err.push(t), json });
  return { out, err, factory, stdout: () => out.join('\n'), stderr: () => err.join('\n') };
}

/** `runlog <args>` in this process: its exit code and what it printed. */
export async function runCli(args: string[]): Promise<Captured & { code: number }> {
  const c = capture();
  const code = await main(args, c.factory);
  return { code, ...c };
}
