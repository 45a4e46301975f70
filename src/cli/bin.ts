// The CLI's process entry: runs `main` with the process's arguments. bin/runlog.js loads the compiled form
// (dist/cli/bin.js); tests run this file from the sources (`node --import tsx src/cli/bin.ts …`).
import { main } from './main.ts';
import { processIo } from './output.ts';

process.exitCode = await main(process.argv.slice(2), processIo, { ownProcess: true });
