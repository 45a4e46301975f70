// For the archive children (archive-child.ts on SQLite, pg-archive-child.ts on PostgreSQL): the onStep hook that
// stops the process dead at one named step, saying so on stderr, until the test kills it with SIGKILL.
import type { ArchiveStep } from '../../src/store/sqlite/archive.ts';

export function stopDeadAt(stopAt: string): (step: ArchiveStep) => void {
  return (step) => {
    if (step !== stopAt) return;
    process.stderr.write(`at ${step}\n`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000); // until killed
  };
}
