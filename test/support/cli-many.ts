// Runs several `runlog` command lines in ONE process (one tsx start-up instead of one per command, which costs
// seconds each on a loaded machine): `node --import tsx cli-many.ts '<JSON array of argv arrays>'`. Prints one JSON
// array of { code, stdout, stderr } on stdout. Used to run the CLI as another user (setpriv) in tests.
import { runCli } from './cli-in-process.ts';

const runs = JSON.parse(process.argv[2] ?? '[]') as string[][];
const results: { code: number; stdout: string; stderr: string }[] = [];
for (const argv of runs) {
  const r = await runCli(argv);
  results.push({ code: r.code, stdout: r.stdout(), stderr: r.stderr() });
}
process.stdout.write(`${JSON.stringify(results)}\n`);
