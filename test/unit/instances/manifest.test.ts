import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ValidationError } from '../../../src/domain/errors.ts';
import {
  DEFAULT_RESTART,
  MANIFEST_FILE,
  TOOL_CATALOG,
  expandTools,
  isValidAppId,
  lifecyclePath,
  missingEntrypointMessage,
  parseManifest,
} from '../../../src/domain/manifest.ts';
import { REPO } from '../../support/apps.ts';

const DIR = '/ws/apps/com.example.hello';
const ok = { appId: 'com.example.hello' };

const issuesOf = (json: unknown, dir = DIR, ctx = {}): string[] => {
  try {
    parseManifest(json, dir, ctx);
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    expect((e as ValidationError).code).toBe('MANIFEST_INVALID');
    return [...(e as ValidationError).issues];
  }
  throw new Error('expected the manifest to be rejected');
};

describe('parseManifest', () => {
  it('reads runlog.json and fills every default', () => {
    expect(MANIFEST_FILE).toBe('runlog.json');
    expect(parseManifest(JSON.stringify(ok), DIR)).toEqual({
      appId: 'com.example.hello',
      sandbox: 'proot',
      runtime: 'astro',
      tools: [],
      lifecycle: { basePath: '' },
      restart: DEFAULT_RESTART,
    });
  });

  it('accepts the hello-app example as shipped', () => {
    const text = readFileSync(join(REPO, 'examples/hello-app/runlog.json'), 'utf8');
    expect(parseManifest(text, DIR, { entrypointExists: true })).toMatchObject({
      appId: 'com.example.hello',
      runtime: 'raw',
      tools: ['bash', 'node'],
    });
  });

  it('keeps an explicit sandbox and rejects an unknown one instead of downgrading it', () => {
    expect(parseManifest({ ...ok, sandbox: 'container' }, DIR).sandbox).toBe('container');
    expect(issuesOf({ ...ok, sandbox: 'firecracker' })).toEqual([
      `sandbox 'firecracker' is unknown (one of: proot, container; absent means 'proot')`,
    ]);
    expect(issuesOf({ ...ok, sandbox: null })).toHaveLength(1);
  });

  it('lists every problem at once', () => {
    const issues = issuesOf({
      appId: 'Hello',
      sandbox: 'vm',
      runtime: 'go',
      tools: 'git',
      lifecycle: { basePath: 'x' },
      restart: { policy: 'always', maxRestarts: -1 },
      extra: 1,
    });
    expect(issues).toHaveLength(8);
    expect(issues.join('\n')).toMatch(/restart.maxRestarts -1 must be an integer/);
    expect(issues.join('\n')).toMatch(/unknown field 'extra'/);
    expect(issues.join('\n')).toMatch(/appId 'Hello' is not a valid app id/);
    expect(issues.join('\n')).toMatch(/sandbox 'vm' is unknown/);
    expect(issues.join('\n')).toMatch(/runtime 'go' is unknown/);
    expect(issues.join('\n')).toMatch(/tools must be a list of tool names, got 'git'/);
    expect(issues.join('\n')).toMatch(/lifecycle.basePath 'x'/);
    expect(issues.join('\n')).toMatch(/restart.policy 'always' is unknown/);
    try {
      parseManifest({ appId: 'Hello', sandbox: 'vm' }, DIR);
    } catch (e) {
      expect((e as Error).message).toContain(`manifest ${DIR}/runlog.json is invalid:\n  - `);
    }
  });

  it('validates appId against the reverse-DNS grammar and the directory name', () => {
    for (const good of ['com.example.hello', 'com.aura.docs', 'io.a1.b-c.d9', `com.example.${'a'.repeat(63)}`])
      expect(isValidAppId(good)).toBe(true);
    for (const bad of [
      'hello',
      'com.example',
      'Com.example.hello',
      'com..hello',
      'com.example.hello.',
      '.com.example.hello',
      'com.example.-hello',
      'com.example.hello-',
      'com.1example.hello',
      'com.example.hel_lo',
      'com.example.hel lo',
      `com.example.${'a'.repeat(64)}`,
      7,
      null,
    ]) {
      expect(isValidAppId(bad), String(bad)).toBe(false);
    }
    expect(issuesOf({})).toEqual([expect.stringMatching(/^appId is required/)]);
    expect(issuesOf({ appId: 'com.example.other' })).toEqual([
      `appId 'com.example.other' does not match its directory name 'com.example.hello' (an app lives in <workspace>/apps/<appId>/)`,
    ]);
  });

  it('checks tools: a list of known names, * and the claude-code alias', () => {
    expect(parseManifest({ ...ok, tools: ['bash', 'git', 'git', '*', 'claude-code'] }, DIR).tools).toEqual([
      'bash',
      'git',
      '*',
      'claude-code',
    ]);
    expect(issuesOf({ ...ok, tools: ['bash', 'rm -rf', 3, 'kubectl'] })).toEqual([
      `tools[1] 'rm -rf' is not a tool name`,
      'tools[2] 3 is not a tool name',
      expect.stringMatching(/^tools\[3\] 'kubectl' is not a known tool \(known: bash, sh,.* '\*', claude-code\)$/),
    ]);
    // The toolchain registry's real names can be passed in.
    expect(issuesOf({ ...ok, tools: ['git'] }, DIR, { knownTools: ['bash'] })).toEqual([
      expect.stringMatching(/'git' is not a known tool/),
    ]);
    expect(TOOL_CATALOG).toContain('claude');
  });

  it('rejects a raw app without its entrypoint file with the seed text, for either runner', () => {
    expect(issuesOf({ ...ok, runtime: 'raw' }, DIR, { entrypointExists: false })).toEqual([
      `[ProotRunner] app 'com.example.hello' has runtime: 'raw' but no entrypoint file at ${DIR}/entrypoint.sh`,
    ]);
    expect(issuesOf({ ...ok, runtime: 'raw', sandbox: 'container' }, DIR, { entrypointExists: false })).toEqual([
      `[ContainerRunner] app 'com.example.hello' has runtime: 'raw' but no entrypoint file at ${DIR}/entrypoint.sh`,
    ]);
    expect(() => parseManifest({ ...ok, runtime: 'raw' }, DIR, { entrypointExists: false })).toThrow(
      `manifest ${DIR}/runlog.json is invalid: [ProotRunner] app 'com.example.hello' has runtime: ` +
        `'raw' but no entrypoint file at ${DIR}/entrypoint.sh`,
    );
    // astro apps get a synthesized entrypoint; a declared one must exist.
    expect(parseManifest({ ...ok }, DIR, { entrypointExists: false }).runtime).toBe('astro');
    expect(issuesOf({ ...ok, entrypoint: 'bin/start.sh' }, DIR, { entrypointExists: false })).toEqual([
      missingEntrypointMessage('proot', 'com.example.hello', `${DIR}/bin/start.sh`, 'astro'),
    ]);
    expect(issuesOf({ ...ok, entrypoint: '../escape.sh' })).toEqual([
      expect.stringMatching(/^entrypoint '..\/escape.sh' must be a path relative/),
    ]);
    expect(issuesOf({ ...ok, entrypoint: '/abs.sh' })).toHaveLength(1);
  });

  it('normalizes lifecycle.basePath and rejects paths that are not plain', () => {
    expect(parseManifest({ ...ok, lifecycle: { basePath: '/docs/' } }, DIR).lifecycle.basePath).toBe('/docs');
    expect(parseManifest({ ...ok, lifecycle: { basePath: '/' } }, DIR).lifecycle.basePath).toBe('');
    expect(parseManifest({ ...ok, lifecycle: {} }, DIR).lifecycle.basePath).toBe('');
    for (const bad of ['docs', '/a/../b', '/a?x=1', '/a b', 5])
      expect(issuesOf({ ...ok, lifecycle: { basePath: bad } }), String(bad)).toHaveLength(1);
    expect(issuesOf({ ...ok, lifecycle: { basePath: '/a', port: 1 } })).toEqual([`lifecycle: unknown field 'port'`]);
    expect(lifecyclePath('/docs', 'health')).toBe('/docs/api/lifecycle/health');
    expect(lifecyclePath('', 'onStart')).toBe('/api/lifecycle/onStart');
  });

  it('validates the restart policy', () => {
    expect(parseManifest({ ...ok, restart: { policy: 'never' } }, DIR).restart).toEqual({
      ...DEFAULT_RESTART,
      policy: 'never',
    });
    expect(
      parseManifest({ ...ok, restart: { maxRestarts: 0, backoffMs: 0, maxBackoffMs: 0 } }, DIR).restart,
    ).toMatchObject({ maxRestarts: 0, backoffMs: 0, maxBackoffMs: 0 });
    expect(issuesOf({ ...ok, restart: { maxRestarts: 1.5, backoffMs: '1s', maxBackoffMs: -1, jitter: true } })).toEqual(
      [
        `restart: unknown field 'jitter'`,
        'restart.maxRestarts 1.5 must be an integer from 0 to 1000',
        `restart.backoffMs '1s' must be an integer from 0 to 86400000`,
        'restart.maxBackoffMs -1 must be an integer from 0 to 86400000',
      ],
    );
    expect(issuesOf({ ...ok, restart: { backoffMs: 5000, maxBackoffMs: 1000 } })).toEqual([
      'restart.maxBackoffMs (1000) is below restart.backoffMs (5000)',
    ]);
    expect(issuesOf({ ...ok, restart: 'on-failure' })).toEqual([`restart must be an object, got 'on-failure'`]);
  });

  it('rejects what is not a JSON object', () => {
    expect(issuesOf('{"appId": ')).toEqual([expect.stringMatching(/^not valid JSON: /)]);
    expect(issuesOf('[1]')).toEqual(['must be a JSON object, got an array']);
    expect(issuesOf(null)).toEqual(['must be a JSON object, got null']);
  });
});

describe('expandTools', () => {
  it('expands * to the available tools and claude-code to claude, without duplicates', () => {
    expect(expandTools(['claude-code', 'git'], ['bash', 'git'])).toEqual(['claude', 'git']);
    expect(expandTools(['git', '*'], ['bash', 'git', 'node'])).toEqual(['git', 'bash', 'node']);
    expect(expandTools([], ['bash'])).toEqual([]);
  });
});
