// The toolchain registry built from this host's binaries, checked against the real Debian rootfs, and used
// inside a real PRoot sandbox.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  HOST_TOOL_PATH,
  buildToolchain,
  toolchainNames,
  type Toolchain,
} from '../../../src/adapters/tools/toolchain.ts';
import { provisionToolsDir } from '../../../src/adapters/tools/provision.ts';
import { shimArgs } from '../../../src/adapters/sandbox/seccomp-shim.ts';
import { ROOTFS, makeWorkspace, requireProot, type TestWorkspace } from '../../support/apps.ts';

let ws: TestWorkspace;
let dir: string;
let tc: Toolchain;
beforeAll(async () => {
  requireProot();
  ws = makeWorkspace('runlog-toolchain-');
  dir = join(ws.home, 'toolchain');
  tc = await buildToolchain({ dir, rootfs: ROOTFS });
});
afterAll(() => ws?.cleanup());

const kind = (name: string): string | undefined => tc.tools.find((t) => t.name === name)?.kind;

describe('buildToolchain', () => {
  it('links tools the rootfs has, copies self-contained host binaries, wraps the rest with their libraries', () => {
    expect(kind('bash')).toBe('base');
    expect(readlinkSync(join(dir, 'bash'))).toBe('/usr/bin/bash');
    expect(kind('node')).toBe('copy');
    // The copy is of the first node in HOST_TOOL_PATH's order (setup may have put a newer LTS in /usr/local/bin).
    const hostNode = HOST_TOOL_PATH.map((d) => join(d, 'node')).find((p) => existsSync(p))!;
    expect(statSync(join(dir, 'node')).size).toBe(
      statSync(execFileSync('readlink', ['-f', hostNode]).toString().trim()).size,
    );
    expect(kind('git')).toBe('copy');
    expect(kind('curl')).toBe('wrapped'); // libcurl is not in the minbase rootfs
    expect(readFileSync(join(dir, 'curl'), 'utf8')).toContain('LD_LIBRARY_PATH=/aura/all-tools/.lib/curl');
    expect(existsSync(join(dir, '.lib/curl/libcurl.so.4'))).toBe(true);
    for (const t of tc.unavailable) expect(toolchainNames(dir)).not.toContain(t.name);
    expect(JSON.parse(readFileSync(join(dir, '.toolchain.json'), 'utf8')).tools).toHaveLength(tc.tools.length);
  });

  it('is idempotent: a rebuild copies nothing again', async () => {
    const before = lstatSync(join(dir, 'node'));
    const again = await buildToolchain({ dir, rootfs: ROOTFS });
    expect(again.tools).toEqual(tc.tools);
    const after = lstatSync(join(dir, 'node'));
    expect(after.ino).toBe(before.ino);
    expect(after.ctimeMs).toBe(before.ctimeMs);
  });

  it('every mirrored tool runs inside the sandbox, through /aura/my-tools', () => {
    const mine = join(ws.home, 'instances/t1/tools');
    provisionToolsDir(mine, dir, ['*']);
    const names = toolchainNames(dir).filter((n) => ['node', 'git', 'curl', 'jq', 'docker', 'bash', 'ls'].includes(n));
    expect(names).toEqual(expect.arrayContaining(['bash', 'git', 'ls', 'node']));
    const script = names
      .map(
        (n) =>
          `printf '%s=' ${n}; command -v ${n}; ${n} --version >/dev/null 2>&1 && echo "${n} ok" || echo "${n} FAILED"`,
      )
      .join('; ');
    const out = execFileSync(
      '/usr/bin/perl',
      shimArgs('/usr/bin/proot', [
        `--rootfs=${ROOTFS}`,
        `--bind=${dir}:/aura/all-tools`,
        `--bind=${mine}:/aura/my-tools`,
        '--cwd=/',
        '/bin/bash',
        '-c',
        script,
      ]),
      {
        env: { PATH: '/aura/my-tools:/usr/bin:/bin' },
      },
    ).toString();
    for (const n of names) {
      expect(out).toContain(`${n}=/aura/my-tools/${n}`);
      expect(out).toContain(`${n} ok`);
    }
  });

  it('fails clearly without a rootfs', async () => {
    await expect(buildToolchain({ dir: join(ws.home, 'tc2'), rootfs: join(ws.home, 'no-rootfs') })).rejects.toThrow(
      /no Debian rootfs at .*run 'npm run setup'/,
    );
  });
});
