// The CLI as a separate process, run from the TypeScript sources through tsx (a devDependency, present after
// `npm ci`): tests exercise the code being edited, never a stale dist/. The compiled bin (bin/runlog.js →
// dist/) is what the consumer test (test/int/repo/consumer.test.ts) runs, from the packed tarball.
import { join } from 'node:path';

export const REPO = join(import.meta.dirname, '..', '..');
export const CLI_ENTRY = join(REPO, 'src', 'cli', 'bin.ts');

/** Arguments for `spawn(process.execPath, cliArgs('ps', '--json'))`. */
export function cliArgs(...args: string[]): string[] {
  return ['--import', 'tsx', CLI_ENTRY, ...args];
}
