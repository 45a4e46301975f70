// Runtime record validation (the seed's "Runtime record validation") and its Lexicon.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { schemas } from '@atproto/api';
import { Lexicons, parseLexiconDoc } from '@atproto/lexicon';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/domain/errors.ts';
import { RecordValidationError } from '../../../src/domain/at-run/record-violations.ts';
import {
  RUNTIME_RECORD_NSID,
  assertRuntimeRecord,
  selectRuntimePlatform,
  validateRuntimeRecord,
  type OciPlatform,
  type RuntimeRecord,
  type RuntimeValidationOptions,
} from '../../../src/domain/at-run/runtime-record.ts';

const REPO_ROOT = resolve(import.meta.dirname, '../../..');
const F = 'a'.repeat(64);
const AMD64: OciPlatform = { os: 'linux', architecture: 'amd64' };
const ARM64V8: OciPlatform = { os: 'linux', architecture: 'arm64', variant: 'v8' };

function record(over: Record<string, unknown> = {}, platformOver: Record<string, unknown> = {}): RuntimeRecord {
  return {
    $type: RUNTIME_RECORD_NSID,
    name: 'python',
    protocolVersion: 1,
    kind: 'language',
    platforms: [
      {
        os: 'linux',
        architecture: 'amd64',
        image: `localhost:5000/runtimes/python@sha256:${F}`,
        exportPath: '/at-run/runtime',
        launcher: { path: 'bin/python3', args: ['-I', '-B', '/opt/at-run/runtime/adapter/worker.py', '{entrypoint}'] },
        env: [
          { name: 'PYTHONHOME', value: '/opt/at-run/runtime' },
          { name: 'LANG', value: 'C.UTF-8' },
        ],
        ...platformOver,
      },
      {
        os: 'linux',
        architecture: 'arm64',
        variant: 'v8',
        image: `localhost:5000/runtimes/python@sha256:${'b'.repeat(64)}`,
        exportPath: '/at-run/runtime',
        launcher: { path: 'bin/python3', args: ['{entrypoint}'] },
      },
    ],
    description: 'CPython 3.12 with the at-run adapter',
    createdAt: '2026-08-18T16:00:00.000Z',
    ...over,
  } as RuntimeRecord;
}

const codes = (value: unknown, opts: RuntimeValidationOptions = {}): string[] =>
  validateRuntimeRecord(value, opts).violations.map((v) => v.code);

describe('a valid runtime record', () => {
  it('passes, and selects exactly the entry for the daemon platform', () => {
    expect(validateRuntimeRecord(record())).toMatchObject({ ok: true, violations: [] });
    const amd = selectRuntimePlatform(record(), AMD64);
    expect(amd.platform.architecture).toBe('amd64');
    expect(amd.image).toMatchObject({ registry: 'localhost:5000', path: 'runtimes/python', digest: `sha256:${F}` });
    expect(selectRuntimePlatform(record(), ARM64V8).platform.variant).toBe('v8');
    expect(assertRuntimeRecord(record()).name).toBe('python');
  });
});

describe('each rule has its own code', () => {
  it('RUNTIME_PROTOCOL_UNSUPPORTED: only worker protocol 1, and only what the operator accepts', () => {
    expect(codes(record({ protocolVersion: 2 }))).toEqual(['RUNTIME_PROTOCOL_UNSUPPORTED']);
    expect(codes(record({ protocolVersion: '1' }))).toEqual(['RUNTIME_PROTOCOL_UNSUPPORTED']);
    expect(codes(record({ protocolVersion: undefined }))).toEqual(['RUNTIME_PROTOCOL_UNSUPPORTED']);
    expect(codes(record(), { acceptedProtocolVersions: [] })).toEqual(['RUNTIME_PROTOCOL_UNSUPPORTED']);
    expect(codes(record({ protocolVersion: 2 }), { acceptedProtocolVersions: [1, 2] })).toEqual([
      'RUNTIME_PROTOCOL_UNSUPPORTED',
    ]);
  });

  it('RUNTIME_KIND_UNSUPPORTED: only "language"', () => {
    expect(codes(record({ kind: 'service' }))).toEqual(['RUNTIME_KIND_UNSUPPORTED']);
    expect(codes(record({ kind: 'Language' }))).toEqual(['RUNTIME_KIND_UNSUPPORTED']);
  });

  it('RUNTIME_PLATFORM_MISSING: exact os/architecture/variant match, no fallback', () => {
    expect(codes(record(), { platform: { os: 'linux', architecture: 'riscv64' } })).toEqual([
      'RUNTIME_PLATFORM_MISSING',
    ]);
    // arm64/v8 in the record does not serve a daemon that reports arm64 without a variant, nor arm64/v9
    expect(codes(record(), { platform: { os: 'linux', architecture: 'arm64' } })).toEqual(['RUNTIME_PLATFORM_MISSING']);
    expect(codes(record(), { platform: { os: 'linux', architecture: 'arm64', variant: 'v9' } })).toEqual([
      'RUNTIME_PLATFORM_MISSING',
    ]);
    // and amd64 without a variant does not serve amd64/v3
    expect(codes(record(), { platform: { os: 'linux', architecture: 'amd64', variant: 'v3' } })).toEqual([
      'RUNTIME_PLATFORM_MISSING',
    ]);
    expect(codes(record(), { platform: { os: 'windows', architecture: 'amd64' } })).toEqual([
      'RUNTIME_PLATFORM_MISSING',
    ]);
    expect(() => selectRuntimePlatform(record(), { os: 'linux', architecture: 's390x' })).toThrow(
      expect.objectContaining({ code: 'RUNTIME_PLATFORM_MISSING' }),
    );
  });

  it('RUNTIME_PLATFORM_DUPLICATE: two entries for one platform, on every runner', () => {
    const r = record();
    r.platforms.push({ ...r.platforms[0]! });
    expect(codes(r, { platform: AMD64 })).toEqual(['RUNTIME_PLATFORM_DUPLICATE']);
    expect(codes(r, { platform: ARM64V8 })).toEqual(['RUNTIME_PLATFORM_DUPLICATE']);
    expect(codes(r)).toEqual(['RUNTIME_PLATFORM_DUPLICATE']);
    expect(() => selectRuntimePlatform(r, AMD64)).toThrow(
      expect.objectContaining({ code: 'RUNTIME_PLATFORM_DUPLICATE' }),
    );
  });

  it('RUNTIME_IMAGE_NOT_DIGEST: tags, tag+digest, other algorithms', () => {
    for (const image of [
      'python:3.12',
      `python:3.12@sha256:${F}`,
      `python@sha512:${'a'.repeat(128)}`,
      `python@sha256:${F.toUpperCase()}`,
      '',
    ]) {
      expect(new Set(codes(record({}, { image }))), image).toEqual(new Set(['RUNTIME_IMAGE_NOT_DIGEST']));
    }
  });

  it('RUNTIME_EXPORT_PATH_INVALID: absolute, normalized, no traversal, no NUL', () => {
    for (const exportPath of [
      'at-run/runtime',
      '/at-run/../etc',
      '//at-run',
      '/at-run//runtime',
      '/at-run/runtime/',
      '/',
      '/at-run/./runtime',
      '/at\u0000run',
      '/a\\b',
      '',
      '/..',
    ]) {
      expect(codes(record({}, { exportPath })), JSON.stringify(exportPath)).toContain('RUNTIME_EXPORT_PATH_INVALID');
      expect(new Set(codes(record({}, { exportPath })))).toEqual(new Set(['RUNTIME_EXPORT_PATH_INVALID']));
    }
  });

  it('RUNTIME_LAUNCHER_INVALID: a relative path without traversal', () => {
    for (const path of [
      '/usr/bin/python3',
      '../python3',
      'bin/../../python3',
      '',
      'bin//python3',
      './bin/python3',
      'bin/python3/',
      'bin/py thon',
      'bin/$(id)',
      'bin/a\u0000b',
    ]) {
      expect(new Set(codes(record({}, { launcher: { path, args: ['{entrypoint}'] } }))), JSON.stringify(path)).toEqual(
        new Set(['RUNTIME_LAUNCHER_INVALID']),
      );
    }
    expect(codes(record({}, { launcher: 'bin/python3 {entrypoint}' }))).toEqual(['RUNTIME_LAUNCHER_INVALID']);
    expect(codes(record({}, { launcher: { path: 'bin/python3', args: ['{entrypoint}', 7] } }))).toEqual([
      'RUNTIME_LAUNCHER_INVALID',
    ]);
  });

  it('RUNTIME_ARGS_SHELL_SYNTAX: arguments are argv, never shell text', () => {
    for (const arg of [
      '-c',
      'import os; os.system("id")',
      '$(id)',
      '`id`',
      'a|b',
      '>out',
      '*.py',
      '~/x',
      'a b',
      "it's",
      'a\nb',
      '',
    ]) {
      const got = codes(
        record(
          {},
          {
            launcher: {
              path: 'bin/python3',
              args: ['-c', arg, '{entrypoint}'].filter((a, i) => i !== 0 || arg === '-c'),
            },
          },
        ),
      );
      if (arg === '-c') expect(got).toEqual([]);
      else expect(got, JSON.stringify(arg)).toEqual(['RUNTIME_ARGS_SHELL_SYNTAX']);
    }
    expect(
      codes(
        record(
          {},
          {
            launcher: {
              path: 'bin/node',
              args: [
                '--max-old-space-size=128',
                '--enable-source-maps',
                '/opt/at-run/runtime/adapter/worker.mjs',
                '{entrypoint}',
              ],
            },
          },
        ),
      ),
    ).toEqual([]);
  });

  it('RUNTIME_ARGS_ENTRYPOINT: exactly one argument is the literal {entrypoint}', () => {
    expect(codes(record({}, { launcher: { path: 'bin/python3', args: [] } }))).toEqual(['RUNTIME_ARGS_ENTRYPOINT']);
    expect(codes(record({}, { launcher: { path: 'bin/python3', args: ['{entrypoint}', '{entrypoint}'] } }))).toEqual([
      'RUNTIME_ARGS_ENTRYPOINT',
    ]);
    expect(codes(record({}, { launcher: { path: 'bin/python3', args: ['--file={entrypoint}'] } }))).toEqual([
      'RUNTIME_ARGS_ENTRYPOINT',
      'RUNTIME_ARGS_ENTRYPOINT',
    ]);
    expect(codes(record({}, { launcher: { path: 'bin/python3' } }))).toEqual(['RUNTIME_ARGS_ENTRYPOINT']);
  });

  it('RUNTIME_ENV_INVALID: portable names, no NUL in values, each name once', () => {
    for (const env of [
      [{ name: '1ABC', value: 'x' }],
      [{ name: 'A-B', value: 'x' }],
      [{ name: 'A=B', value: 'x' }],
      [{ name: '', value: 'x' }],
      [{ name: 'A', value: 'x\u0000y' }],
      [{ name: 'A', value: 1 }],
      [
        { name: 'A', value: 'x' },
        { name: 'A', value: 'y' },
      ],
      [{ name: 'A', value: 'x', extra: true }],
      { A: 'x' },
    ]) {
      expect(codes(record({}, { env })), JSON.stringify(env)).toEqual(['RUNTIME_ENV_INVALID']);
    }
    expect(codes(record({}, { env: [{ name: '_lower_ok_1', value: '' }] }))).toEqual([]);
  });

  it('RUNTIME_RECORD_INVALID: shape, $type, name, createdAt, unknown fields', () => {
    expect(codes('not a record')).toEqual(['RUNTIME_RECORD_INVALID']);
    expect(codes(record({ $type: 'dev.mainasara.at-run.beta.v1.runtime' }))).toEqual(['RUNTIME_RECORD_INVALID']);
    expect(codes(record({ name: 'Python 3' }))).toEqual(['RUNTIME_RECORD_INVALID']);
    expect(codes(record({ createdAt: '2026-08-18 16:00' }))).toEqual(['RUNTIME_RECORD_INVALID']);
    expect(codes(record({ hooks: { preLaunch: 'rm -rf /' } }))).toEqual(['RUNTIME_RECORD_INVALID']);
    expect(codes(record({}, { entrypointOverride: 'x' }))).toEqual(['RUNTIME_RECORD_INVALID']);
    expect(codes(record({ platforms: [] }))).toEqual(['RUNTIME_RECORD_INVALID']);
    expect(codes(record({}, { os: 'Linux' }))).toEqual(['RUNTIME_RECORD_INVALID']);
  });
});

describe('collecting every issue', () => {
  it('reports every broken rule of a record at once, in every platform entry', () => {
    const bad = record(
      { protocolVersion: 3, kind: 'vm' },
      {
        image: 'python:latest',
        exportPath: '../x',
        launcher: { path: '/bin/sh', args: ['-c', 'echo $HOME'] },
        env: [{ name: 'BAD-NAME', value: 'x' }],
      },
    );
    (bad.platforms[1] as unknown as Record<string, unknown>).exportPath = 'relative';
    const check = validateRuntimeRecord(bad, { platform: AMD64 });
    expect(check.ok).toBe(false);
    expect(new Set(check.violations.map((v) => v.code))).toEqual(
      new Set([
        'RUNTIME_PROTOCOL_UNSUPPORTED',
        'RUNTIME_KIND_UNSUPPORTED',
        'RUNTIME_IMAGE_NOT_DIGEST',
        'RUNTIME_EXPORT_PATH_INVALID',
        'RUNTIME_LAUNCHER_INVALID',
        'RUNTIME_ARGS_SHELL_SYNTAX',
        'RUNTIME_ARGS_ENTRYPOINT',
        'RUNTIME_ENV_INVALID',
      ]),
    );
    expect(check.violations.map((v) => v.path)).toContain('platforms[1].exportPath');
    expect(check.violations.map((v) => v.path)).toContain('platforms[0].launcher.args[1]');
  });

  it('throws a RecordValidationError whose code is the first violation and which lists them all', () => {
    let err: unknown;
    try {
      selectRuntimePlatform(record({ kind: 'vm' }, { image: 'python:latest' }), AMD64);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RecordValidationError);
    expect(err).toBeInstanceOf(ValidationError);
    const e = err as RecordValidationError;
    expect(e.code).toBe('RUNTIME_KIND_UNSUPPORTED');
    expect(e.codes).toEqual(['RUNTIME_KIND_UNSUPPORTED', 'RUNTIME_IMAGE_NOT_DIGEST']);
    expect(e.issues).toHaveLength(e.violations.length);
    expect(e.toJSON()).toMatchObject({ code: 'RUNTIME_KIND_UNSUPPORTED' });
  });
});

describe('the Lexicon matches the type', () => {
  const doc = JSON.parse(
    readFileSync(resolve(REPO_ROOT, 'lexicons/dev.mainasara.at-run.beta.v2.runtime.json'), 'utf8'),
  ) as Record<string, any>;
  const strongRef = schemas.find((s) => s.id === 'com.atproto.repo.strongRef')!;
  const lex = new Lexicons([doc as any, strongRef]);

  it('is a valid Lexicon (format 1) for the runtime NSID', () => {
    expect(doc.lexicon).toBe(1);
    expect(doc.id).toBe(RUNTIME_RECORD_NSID);
    expect(() => parseLexiconDoc(doc)).not.toThrow();
  });

  it('accepts what our validator accepts, field for field', () => {
    const value = record();
    lex.assertValidRecord(RUNTIME_RECORD_NSID, value);
    const props = doc.defs.main.record.properties as Record<string, unknown>;
    expect(
      Object.keys(value)
        .filter((k) => k !== '$type')
        .sort(),
    ).toEqual(Object.keys(props).sort());
    expect(Object.keys(value.platforms[0]!).sort()).toEqual(
      Object.keys(doc.defs.platform.properties)
        .filter((k) => k !== 'variant')
        .sort(),
    );
    expect(Object.keys(value.platforms[1]!).sort()).toEqual(
      Object.keys(doc.defs.platform.properties)
        .filter((k) => k !== 'env')
        .sort(),
    );
  });

  it('requires what our validator requires', () => {
    for (const field of doc.defs.main.record.required as string[]) {
      const value = record({ [field]: undefined });
      expect(() => lex.assertValidRecord(RUNTIME_RECORD_NSID, JSON.parse(JSON.stringify(value))), field).toThrow();
      expect(validateRuntimeRecord(JSON.parse(JSON.stringify(value))).ok, field).toBe(false);
    }
    for (const field of doc.defs.platform.required as string[]) {
      const value = JSON.parse(JSON.stringify(record({}, { [field]: undefined })));
      expect(() => lex.assertValidRecord(RUNTIME_RECORD_NSID, value), field).toThrow();
      expect(validateRuntimeRecord(value).ok, field).toBe(false);
    }
  });
});
