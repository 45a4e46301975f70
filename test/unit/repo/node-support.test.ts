// The supported Node lines: package.json's engines, the pinned LTS that `npm run setup` installs when the
// machine's Node is older (scripts/install-node.sh), and the Node the JavaScript runtime image carries (its
// runtime record names it).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = join(import.meta.dirname, '../../..');
const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { engines: { node: string } };

function pinned(): string {
  const r = spawnSync('bash', [join(REPO, 'scripts/install-node.sh'), '--pinned'], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim();
}

describe('supported Node', () => {
  it('engines.node is >=22 and the Node running the tests satisfies it', () => {
    expect(pkg.engines.node).toBe('>=22');
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(22);
  });

  it('the pinned Node is an LTS line (even major) at or above the floor', () => {
    const v = pinned();
    expect(v).toMatch(/^\d+\.\d+\.\d+$/);
    const major = Number(v.split('.')[0]);
    expect(major).toBeGreaterThanOrEqual(22);
    expect(major % 2).toBe(0);
  });

  it('the JavaScript runtime record names the pinned Node, which its image carries', () => {
    const record = JSON.parse(readFileSync(join(REPO, 'runtimes/node/runtime-record.json'), 'utf8')) as {
      description: string;
    };
    expect(record.description.startsWith(`Node.js ${pinned()} `)).toBe(true);
  });
});
