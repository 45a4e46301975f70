// The per-instance allowlist (/aura/my-tools) over a toolchain directory (/aura/all-tools).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { provisionToolsDir } from '../../../src/adapters/tools/provision.ts';

let root: string;
let all: string;
let mine: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'runlog-tools-'));
  all = join(root, 'toolchain');
  mine = join(root, 'instances/i1/tools');
  mkdirSync(join(all, '.lib'), { recursive: true });
  for (const t of ['bash', 'node', 'git', 'claude']) writeFileSync(join(all, t), '#!/bin/sh\n', { mode: 0o755 });
  writeFileSync(join(all, '.toolchain.json'), '{}');
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const links = (): Record<string, string> =>
  Object.fromEntries(
    readdirSync(mine)
      .sort()
      .map((n) => [n, readlinkSync(join(mine, n))]),
  );

describe('provisionToolsDir', () => {
  it('links exactly the granted tools to their in-sandbox path', () => {
    const r = provisionToolsDir(mine, all, ['bash', 'node']);
    expect(r).toEqual({ linked: ['bash', 'node'], missing: [], removed: [] });
    expect(links()).toEqual({ bash: '/aura/all-tools/bash', node: '/aura/all-tools/node' });
  });

  it('mirrors everything for *, never the hidden support files', () => {
    provisionToolsDir(mine, all, ['*']);
    expect(Object.keys(links())).toEqual(['bash', 'claude', 'git', 'node']);
  });

  it('maps claude-code to claude and reports tools the host lacks', () => {
    expect(provisionToolsDir(mine, all, ['claude-code', 'docker'])).toEqual({
      linked: ['claude'],
      missing: ['docker'],
      removed: [],
    });
    expect(links()).toEqual({ claude: '/aura/all-tools/claude' });
  });

  it('is idempotent, and a revoke removes the link (and anything else that is not granted)', () => {
    provisionToolsDir(mine, all, ['bash', 'git']);
    const ino = lstatSync(join(mine, 'bash')).ino;
    expect(provisionToolsDir(mine, all, ['bash', 'git'])).toEqual({
      linked: ['bash', 'git'],
      missing: [],
      removed: [],
    });
    expect(lstatSync(join(mine, 'bash')).ino).toBe(ino); // untouched, not re-created
    symlinkSync('/usr/bin/rm', join(mine, 'rm')); // smuggled in
    mkdirSync(join(mine, 'subdir'));
    expect(provisionToolsDir(mine, all, ['bash'])).toEqual({
      linked: ['bash'],
      missing: [],
      removed: ['git', 'rm', 'subdir'],
    });
    expect(links()).toEqual({ bash: '/aura/all-tools/bash' });
    expect(provisionToolsDir(mine, all, []).removed).toEqual(['bash']);
    expect(readdirSync(mine)).toEqual([]);
  });

  it('replaces a link that points somewhere else', () => {
    mkdirSync(mine, { recursive: true });
    symlinkSync('/usr/bin/evil', join(mine, 'git'));
    provisionToolsDir(mine, all, ['git']);
    expect(links()).toEqual({ git: '/aura/all-tools/git' });
  });
});
