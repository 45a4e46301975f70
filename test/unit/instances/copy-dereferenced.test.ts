// Apps are copied into the workspace with every symlink replaced by what it points at (Node 22/24's cpSync
// dereference leaves nested links as links).
import { chmodSync, lstatSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyDereferenced } from '../../../src/adapters/apps/copy-dereferenced.ts';
import { RunlogError } from '../../../src/domain/errors.ts';
import { tempDir } from '../../support/tmp.ts';

describe('copyDereferenced', () => {
  it('copies nested links to files and directories as their targets, keeping modes', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'common/lib'), { recursive: true });
    writeFileSync(join(dir, 'common/sdk.mjs'), 'export const sdk = 1;\n');
    writeFileSync(join(dir, 'common/lib/util.mjs'), 'export {};\n');
    mkdirSync(join(dir, 'app/sub'), { recursive: true });
    writeFileSync(join(dir, 'app/run.sh'), '#!/bin/sh\n');
    chmodSync(join(dir, 'app/run.sh'), 0o755);
    symlinkSync('../../common/sdk.mjs', join(dir, 'app/sub/sdk.mjs'));
    symlinkSync('../common/lib', join(dir, 'app/lib'));
    copyDereferenced(join(dir, 'app'), join(dir, 'out'));
    expect(lstatSync(join(dir, 'out/sub/sdk.mjs')).isFile()).toBe(true);
    expect(readFileSync(join(dir, 'out/sub/sdk.mjs'), 'utf8')).toBe('export const sdk = 1;\n');
    expect(lstatSync(join(dir, 'out/lib')).isDirectory()).toBe(true);
    expect(readFileSync(join(dir, 'out/lib/util.mjs'), 'utf8')).toBe('export {};\n');
    expect(statSync(join(dir, 'out/run.sh')).mode & 0o777).toBe(0o755);
  });

  it('refuses a directory link back into its own ancestors, and a dangling link names itself', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'app'));
    symlinkSync('..', join(dir, 'app/up'));
    expect(() => copyDereferenced(join(dir, 'app'), join(dir, 'out'))).toThrow(RunlogError);
    const dir2 = tempDir();
    mkdirSync(join(dir2, 'app'));
    symlinkSync('nowhere', join(dir2, 'app/gone'));
    expect(() => copyDereferenced(join(dir2, 'app'), join(dir2, 'out'))).toThrow(/app\/gone/);
  });
});
