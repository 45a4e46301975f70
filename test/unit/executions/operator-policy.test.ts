// The runner operator's policy: parsing (every issue listed), limit clamping/rejection, fail-closed network,
// publisher, registry and platform checks, and which publishers' runtimes may be pre-started.

import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/domain/errors.ts';
import { DEFAULT_ARCHIVE_LIMITS } from '../../../src/domain/at-run/archive-limits.ts';
import {
  DEFAULT_OPERATOR_POLICY,
  parseOperatorPolicy,
  type OperatorPolicy,
} from '../../../src/domain/at-run/operator-policy.ts';
import {
  admitCode,
  admitRuntime,
  checkPlatform,
  checkPublisher,
  checkRegistry,
  effectiveLimits,
  mayPrestart,
} from '../../../src/domain/at-run/policy-admission.ts';
import { parseDigestReference } from '../../../src/domain/at-run/oci-reference.ts';
import { RecordValidationError } from '../../../src/domain/at-run/record-violations.ts';
import { CODE_RECORD_NSID, type CodeRecord } from '../../../src/domain/at-run/code-record.ts';
import { RUNTIME_RECORD_NSID } from '../../../src/domain/at-run/runtime-record.ts';

const F = 'd'.repeat(64);
const ALICE = 'did:plc:alice00000000000000000000';
const BOB = 'did:web:bob.example.com';

function thrown(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ValidationError);
    return e as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

describe('parseOperatorPolicy', () => {
  it('fills omitted fields from the defaults, from JSON text or a parsed value', () => {
    expect(parseOperatorPolicy('{}')).toEqual(DEFAULT_OPERATOR_POLICY);
    const p = parseOperatorPolicy({ limitMode: 'reject', ceilings: { memoryMb: 1024 }, archive: { maxEntries: 100 } });
    expect(p.limitMode).toBe('reject');
    expect(p.ceilings).toEqual({ ...DEFAULT_OPERATOR_POLICY.ceilings, memoryMb: 1024 });
    expect(p.archive).toEqual({ ...DEFAULT_ARCHIVE_LIMITS, maxEntries: 100 });
    expect(Object.isFrozen(p) && Object.isFrozen(p.ceilings) && Object.isFrozen(p.publishers)).toBe(true);
  });

  it('reads a complete policy file', () => {
    const p = parseOperatorPolicy(
      JSON.stringify({
        protocolVersions: [1],
        platforms: [{ os: 'linux', architecture: 'arm64', variant: 'v8' }],
        publishers: [ALICE, BOB],
        registries: ['ghcr.io', 'localhost:5000', '[::1]:5000'],
        archive: { maxArchiveBytes: 1000, maxEntries: 10, maxExpandedBytes: 2000, maxFileBytes: 500 },
        ceilings: {
          memoryMb: 256,
          cpus: 0.5,
          pids: 32,
          timeoutMs: 1000,
          stdoutBytes: 10,
          stderrBytes: 10,
          frameBytes: 10,
        },
        defaults: { memoryMb: 128, cpus: 0.25, pids: 16, timeoutMs: 500 },
        limitMode: 'clamp',
        isolation: 'runsc',
      }),
    );
    expect(p.isolation).toBe('runsc');
    expect(p.ceilings.cpus).toBe(0.5);
    expect(p.publishers).toEqual([ALICE, BOB]);
  });

  it('lists every issue at once', () => {
    const err = thrown(() =>
      parseOperatorPolicy({
        protocolVersions: [2],
        platforms: [{ os: 'Linux' }],
        publishers: ['alice.bsky.social'],
        registries: ['https://ghcr.io'],
        archive: { maxEntries: -1, maxBytes: 5 },
        ceilings: { memoryMb: 0, cpus: 'two', network: true },
        defaults: { timeoutMs: 120_000 },
        limitMode: 'warn',
        isolation: 'none',
        allowNetwork: true,
      }),
    );
    expect(err.code).toBe('OPERATOR_POLICY_INVALID');
    const text = err.issues.join('\n');
    for (const fragment of [
      'allowNetwork is not a known setting',
      'protocolVersions[0] 2',
      'platforms[0].os',
      'platforms[0].architecture',
      'publishers[0] "alice.bsky.social" is not a DID',
      'registries[0] "https://ghcr.io"',
      'archive.maxEntries',
      'archive.maxBytes is not a known limit',
      'ceilings.network is not a known setting',
      'ceilings.memoryMb must be a positive integer',
      'ceilings.cpus must be a positive number',
      'defaults.timeoutMs (120000) is above ceilings.timeoutMs (60000)',
      'limitMode must be "clamp" or "reject"',
      'isolation must be "runc" or "runsc"',
    ]) {
      expect(text).toContain(fragment);
    }
  });

  it('refuses non-JSON and non-objects', () => {
    expect(thrown(() => parseOperatorPolicy('{ nope')).code).toBe('OPERATOR_POLICY_INVALID');
    expect(thrown(() => parseOperatorPolicy('[]')).code).toBe('OPERATOR_POLICY_INVALID');
    expect(thrown(() => parseOperatorPolicy({ platforms: [] })).issues.join()).toMatch(/non-empty/);
  });
});

describe('effectiveLimits', () => {
  const clamp = parseOperatorPolicy({ limitMode: 'clamp' });
  const reject = parseOperatorPolicy({ limitMode: 'reject' });

  it('uses the policy defaults when nothing is requested, and the ceilings for output and frames', () => {
    const { limits, clamped } = effectiveLimits(clamp);
    expect(limits).toEqual({
      ...DEFAULT_OPERATOR_POLICY.ceilings,
      ...DEFAULT_OPERATOR_POLICY.defaults,
      network: false,
    });
    expect(clamped).toEqual([]);
  });

  it('grants requests within the ceilings as asked', () => {
    const { limits, clamped } = effectiveLimits(reject, {
      memoryMb: 100,
      cpus: 1,
      pids: 10,
      timeoutMs: 2000,
      network: false,
    });
    expect(limits).toMatchObject({ memoryMb: 100, cpus: 1, pids: 10, timeoutMs: 2000, network: false });
    expect(clamped).toEqual([]);
  });

  it('clamp mode lowers each excess to its ceiling and names it', () => {
    const { limits, clamped } = effectiveLimits(clamp, { memoryMb: 4096, cpus: 8, pids: 10, timeoutMs: 3_600_000 });
    expect(limits).toMatchObject({ memoryMb: 512, cpus: 1, pids: 10, timeoutMs: 60_000 });
    expect(clamped).toEqual(['memoryMb', 'cpus', 'timeoutMs']);
  });

  it('reject mode refuses with LIMIT_EXCEEDS_POLICY listing every excess', () => {
    const err = thrown(() => effectiveLimits(reject, { memoryMb: 4096, pids: 1000 }));
    expect(err.code).toBe('LIMIT_EXCEEDS_POLICY');
    expect(err.issues).toEqual([
      'memoryMb 4096 exceeds the policy ceiling 512',
      'pids 1000 exceeds the policy ceiling 128',
    ]);
  });

  it('network fails closed in both modes', () => {
    for (const policy of [clamp, reject]) {
      expect(thrown(() => effectiveLimits(policy, { network: true })).code).toBe('NETWORK_NOT_ALLOWED');
      expect(thrown(() => effectiveLimits(policy, { network: true, memoryMb: 1 })).code).toBe('NETWORK_NOT_ALLOWED');
    }
    expect(thrown(() => effectiveLimits(clamp, { network: 'yes' as unknown as boolean })).code).toBe('LIMIT_INVALID');
  });

  it('refuses malformed requests instead of guessing', () => {
    const err = thrown(() => effectiveLimits(clamp, { memoryMb: -5, pids: 1.5, cpus: Number.NaN }));
    expect(err.code).toBe('LIMIT_INVALID');
    expect(err.issues).toHaveLength(3);
  });
});

describe('publishers, registries and platforms', () => {
  const strict: OperatorPolicy = parseOperatorPolicy({
    publishers: [ALICE],
    registries: ['ghcr.io', 'LOCALHOST:5000'],
  });
  const none: OperatorPolicy = parseOperatorPolicy({ publishers: [], registries: [] });

  it('checkPublisher: "*" allows any DID, a list allows its DIDs, an empty list allows none', () => {
    expect(() => checkPublisher(DEFAULT_OPERATOR_POLICY, BOB)).not.toThrow();
    expect(() => checkPublisher(strict, ALICE)).not.toThrow();
    expect(thrown(() => checkPublisher(strict, BOB)).code).toBe('PUBLISHER_NOT_ALLOWED');
    expect(thrown(() => checkPublisher(none, ALICE)).message).toMatch(/empty/);
    expect(thrown(() => checkPublisher(DEFAULT_OPERATOR_POLICY, 'alice.example.com')).code).toBe(
      'PUBLISHER_NOT_ALLOWED',
    );
  });

  it('checkRegistry: exact host[:port], hosts case-insensitive, a bare name is docker.io, digest required', () => {
    expect(checkRegistry(strict, `ghcr.io/org/python@sha256:${F}`).path).toBe('org/python');
    expect(() => checkRegistry(strict, `localhost:5000/python@sha256:${F}`)).not.toThrow();
    expect(() => checkRegistry(strict, parseDigestReference(`localhost:5000/python@sha256:${F}`))).not.toThrow();
    expect(thrown(() => checkRegistry(strict, `localhost:5001/python@sha256:${F}`)).code).toBe('REGISTRY_NOT_ALLOWED');
    expect(thrown(() => checkRegistry(strict, `ghcr.io.evil.com/python@sha256:${F}`)).code).toBe(
      'REGISTRY_NOT_ALLOWED',
    );
    expect(thrown(() => checkRegistry(strict, `python@sha256:${F}`)).details).toMatchObject({ registry: 'docker.io' });
    expect(thrown(() => checkRegistry(strict, 'ghcr.io/org/python:3.12')).code).toBe('RUNTIME_IMAGE_NOT_DIGEST');
    expect(thrown(() => checkRegistry(none, `ghcr.io/org/python@sha256:${F}`)).code).toBe('REGISTRY_NOT_ALLOWED');
    expect(() => checkRegistry(parseOperatorPolicy({ registries: ['*'] }), `python@sha256:${F}`)).not.toThrow();
  });

  it('the default policy allows only the local registry', () => {
    expect(() => checkRegistry(DEFAULT_OPERATOR_POLICY, `localhost:5000/x@sha256:${F}`)).not.toThrow();
    expect(() => checkRegistry(DEFAULT_OPERATOR_POLICY, `127.0.0.1:5000/x@sha256:${F}`)).not.toThrow();
    expect(thrown(() => checkRegistry(DEFAULT_OPERATOR_POLICY, `docker.io/library/python@sha256:${F}`)).code).toBe(
      'REGISTRY_NOT_ALLOWED',
    );
  });

  it('checkPlatform: os and architecture exactly; a policy entry without a variant accepts any variant', () => {
    expect(() => checkPlatform(DEFAULT_OPERATOR_POLICY, { os: 'linux', architecture: 'amd64' })).not.toThrow();
    expect(() =>
      checkPlatform(DEFAULT_OPERATOR_POLICY, { os: 'linux', architecture: 'arm64', variant: 'v8' }),
    ).not.toThrow();
    expect(thrown(() => checkPlatform(DEFAULT_OPERATOR_POLICY, { os: 'linux', architecture: 'riscv64' })).code).toBe(
      'PLATFORM_NOT_ACCEPTED',
    );
    const v8only = parseOperatorPolicy({ platforms: [{ os: 'linux', architecture: 'arm64', variant: 'v8' }] });
    expect(thrown(() => checkPlatform(v8only, { os: 'linux', architecture: 'arm64' })).code).toBe(
      'PLATFORM_NOT_ACCEPTED',
    );
  });
});

describe('admitCode and admitRuntime (everything the policy says, at once)', () => {
  const code = (over: Partial<CodeRecord> = {}): CodeRecord => ({
    $type: CODE_RECORD_NSID,
    runtime: 'python',
    runtimeRecord: { uri: `at://${ALICE}/${RUNTIME_RECORD_NSID}/3l`, cid: 'bafyrei-runtime' },
    blob: { $type: 'blob', ref: { $link: 'bafkrei-blob' }, mimeType: 'application/bafyrei-runtime', size: 1000 },
    entrypoint: 'main.py',
    createdAt: '2026-08-18T16:00:00Z',
    ...over,
  });
  const policy = parseOperatorPolicy({
    publishers: [ALICE],
    registries: ['localhost:5000'],
    archive: { maxArchiveBytes: 5000 },
    limitMode: 'reject',
  });

  it('admits a code record within the policy and returns its limits', () => {
    expect(
      admitCode(policy, code({ requested: { memoryMb: 128 }, additions: [`localhost:5000/a@sha256:${F}`] })).limits
        .memoryMb,
    ).toBe(128);
  });

  it('lists every refusal with its own code', () => {
    let err: unknown;
    try {
      admitCode(
        policy,
        code({
          runtimeRecord: { uri: `at://${BOB}/${RUNTIME_RECORD_NSID}/3l`, cid: 'x' },
          additions: [`ghcr.io/a@sha256:${F}`, 'a:latest'],
          blob: { $type: 'blob', ref: { $link: 'b' }, mimeType: 'application/x', size: 6000 },
          requested: { network: true },
        }),
      );
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RecordValidationError);
    expect((err as RecordValidationError).violations.map((v) => [v.code, v.path])).toEqual([
      ['PUBLISHER_NOT_ALLOWED', 'runtimeRecord.uri'],
      ['REGISTRY_NOT_ALLOWED', 'additions[0]'],
      ['RUNTIME_IMAGE_NOT_DIGEST', 'additions[1]'],
      ['BLOB_TOO_LARGE', 'blob.size'],
      ['NETWORK_NOT_ALLOWED', 'requested'],
    ]);
  });

  it('admitRuntime checks platform, protocol version and image registry', () => {
    const platform = {
      os: 'linux',
      architecture: 'amd64',
      image: `localhost:5000/rt@sha256:${F}`,
      exportPath: '/x',
      launcher: { path: 'bin/x', args: ['{entrypoint}'] },
    };
    expect(admitRuntime(policy, { record: { protocolVersion: 1 }, platform }).registry).toBe('localhost:5000');
    let err: unknown;
    try {
      admitRuntime(policy, {
        record: { protocolVersion: 2 },
        platform: { ...platform, architecture: 'mips', image: `docker.io/rt@sha256:${F}` },
      });
    } catch (e) {
      err = e;
    }
    expect((err as RecordValidationError).codes).toEqual([
      'PLATFORM_NOT_ACCEPTED',
      'RUNTIME_PROTOCOL_UNSUPPORTED',
      'REGISTRY_NOT_ALLOWED',
    ]);
  });
});

describe('operator policy: which runtimes may be pre-started', () => {
  const did = 'did:plc:ewvi7nxzyoun6zhxrhs64oiz';

  it('by default no publisher is trusted to pre-start, though any may publish runtimes', () => {
    const policy = parseOperatorPolicy({});
    expect(policy.publishers).toEqual(['*']);
    expect(policy.prestart.publishers).toEqual([]);
    expect(DEFAULT_OPERATOR_POLICY.prestart.publishers).toEqual([]);
    expect(mayPrestart(policy.prestart, did)).toBe(false);
  });

  it('the operator names the publishers it trusts, or writes "*"; the other bounds keep their defaults', () => {
    const named = parseOperatorPolicy({ prestart: { publishers: [did] } }).prestart;
    expect(named).toEqual({ ...DEFAULT_OPERATOR_POLICY.prestart, publishers: [did] });
    expect(mayPrestart(named, did)).toBe(true);
    expect(mayPrestart(named, 'did:plc:someoneelse')).toBe(false);
    expect(mayPrestart(parseOperatorPolicy({ prestart: { publishers: ['*'] } }).prestart, 'did:plc:someoneelse')).toBe(
      true,
    );
  });

  it('a prestart.publishers that is not a list of DIDs is refused, every bad entry named', () => {
    let err: unknown;
    try {
      parseOperatorPolicy({ prestart: { publishers: ['alice.test', 7, did] } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).code).toBe('OPERATOR_POLICY_INVALID');
    expect((err as ValidationError).issues).toEqual([
      'prestart.publishers[0] "alice.test" is not a DID or "*"',
      'prestart.publishers[1] 7 is not a DID or "*"',
    ]);
    expect(() => parseOperatorPolicy({ prestart: { publishers: 'did:plc:x' } })).toThrow(
      /prestart.publishers must be an array of a DID/,
    );
  });
});

describe('operator policy: job records taken from the network', () => {
  it('takes only addressed jobs by default, 60 per repo per minute, 1000 waiting', () => {
    expect(DEFAULT_OPERATOR_POLICY.jobs).toEqual({ acceptUnaddressed: false, perRepoPerMinute: 60, maxQueued: 1000 });
    expect(parseOperatorPolicy('{}').jobs).toEqual(DEFAULT_OPERATOR_POLICY.jobs);
  });

  it('reads the jobs section over the defaults', () => {
    const p = parseOperatorPolicy({ jobs: { acceptUnaddressed: true, perRepoPerMinute: 5 } });
    expect(p.jobs).toEqual({ acceptUnaddressed: true, perRepoPerMinute: 5, maxQueued: 1000 });
    expect(Object.isFrozen(p.jobs)).toBe(true);
  });

  it('lists every issue of the jobs section, an unknown setting included', () => {
    const err = thrown(() =>
      parseOperatorPolicy({ jobs: { acceptUnaddressed: 'yes', perRepoPerMinute: 0, maxQueued: 1.5, perRepo: 3 } }),
    );
    expect(err.code).toBe('OPERATOR_POLICY_INVALID');
    expect(err.issues).toEqual([
      'jobs.perRepo is not a known setting',
      'jobs.acceptUnaddressed must be true or false (got "yes")',
      'jobs.perRepoPerMinute must be an integer from 1 to 1000000 (got 0)',
      'jobs.maxQueued must be an integer from 1 to 1000000 (got 1.5)',
    ]);
    expect(thrown(() => parseOperatorPolicy({ jobs: true })).issues).toEqual([
      'jobs must be an object { acceptUnaddressed, perRepoPerMinute, maxQueued }',
    ]);
  });
});
