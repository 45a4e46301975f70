import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach } from 'vitest';

/** A fresh temp directory per call, removed after the test. */
export function tempDir(prefix = 'runlog-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * A maker of fresh temp directories, called once at a test file's top level: every directory it makes is removed
 * after each test (`'each'`) or after the file's tests (`'all'`, for a directory a later hook still uses). Its
 * hook is registered here, so with vitest's stacked after-hooks it runs after those the file registers later
 * (a file that kills child processes in its own afterEach has them killed before their directories go).
 */
export function freshDirs(prefix: string, removeAfter: 'each' | 'all' = 'each'): () => string {
  const dirs: string[] = [];
  (removeAfter === 'each' ? afterEach : afterAll)(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  return () => {
    const d = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(d);
    return d;
  };
}
