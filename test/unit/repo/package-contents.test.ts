// What the npm tarball ships, seen the way npm sees it (`npm pack --dry-run --json`, no build: the listing, not
// dist/) and the way git does: no compiled Python (a `.pyc` is interpreter- and machine-specific, and Python
// writes its own beside the sources when it runs them).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = join(import.meta.dirname, '../../..');
const PYTHON_BYTECODE = /(^|\/)__pycache__\/|\.py[co]$/;

describe('the package', () => {
  it('tracks no Python bytecode in git', () => {
    const tracked = execFileSync('git', ['ls-files'], { cwd: REPO, encoding: 'utf8' }).split('\n');
    expect(tracked.filter((f) => PYTHON_BYTECODE.test(f))).toEqual([]);
  });

  it('packs no Python bytecode (npm pack --dry-run lists none)', { timeout: 60_000 }, () => {
    const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: REPO,
      encoding: 'utf8',
      env: { ...process.env, npm_config_update_notifier: 'false' },
    });
    const [packed] = JSON.parse(out.slice(out.search(/^\[/m))) as { files: { path: string }[] }[];
    const files = packed!.files.map((f) => f.path);
    expect(files).toContain('runtimes/python/adapter/worker.py');
    expect(files.filter((f) => PYTHON_BYTECODE.test(f))).toEqual([]);
  });
});
