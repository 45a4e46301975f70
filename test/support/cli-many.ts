// Runs several `runlog` command lines in ONE process (one tsx start-up instead of one per command, which costs
// seconds each on a loaded machine): `node --import tsx cli-many.ts '<JSON array of argv arrays>'`. Prints one JSON
// array of { code, stdout, stderr } on stdout. Used to run the CLI as another user (setpriv) in tests.
import { main } from '../../src/cli/main.ts';
import type { Io } from '../../src/cli/output.ts';

const runs = JSON.parse(process.argv[2] ?? '[]') as string[][];
const results: { code: number; stdout: string; stderr: string }[] = [];
for (const argv of runs) {
  const out: string[] = [];
  const err: string[] = [];
  const io = (json: boolean): Io => ({ out: (t) => out.push(t), err: (t) => err.push(t), json });
  const code = await main(argv, io);
  results.push({ code, stdout: out.join('\n'), stderr: err.join('\n') });
}
process.stdout.write(`${JSON.stringify(results)}\n`);
