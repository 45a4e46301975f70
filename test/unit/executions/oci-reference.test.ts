// OCI references against the upstream test tables in test/fixtures/oci (distribution/reference,
// opencontainers/go-digest). Each upstream verdict is mapped to ours here, with the reason when they differ:
// our policy only accepts NAME@sha256:<64 lower-case hex>, never a tag.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/domain/errors.ts';
import {
  digestReferenceIssues,
  effectiveRegistry,
  isDigestReference,
  parseDigest,
  parseDigestReference,
} from '../../../src/domain/at-run/oci-reference.ts';

const REPO_ROOT = resolve(import.meta.dirname, '../../..');
const CASES_FILE = resolve(REPO_ROOT, 'test/fixtures/oci/oci-reference-and-digest-cases.json');

interface UpstreamCase {
  input: string;
  upstream: string;
}
const corpus = JSON.parse(readFileSync(CASES_FILE, 'utf8')) as { reference: UpstreamCase[]; digest: UpstreamCase[] };

const F = 'f'.repeat(64);

/** Our verdict for every upstream reference case: the parsed parts, or the reason we refuse (an issue substring). */
const REFERENCE_VERDICTS: Record<
  string,
  { ok: { repository: string; registry?: string; path: string } } | { reject: RegExp; why: string }
> = {
  [`test:5000/repo@sha256:${F}`]: { ok: { repository: 'test:5000/repo', registry: 'test:5000', path: 'repo' } },
  [`test:5000/repo:tag@sha256:${F}`]: {
    reject: /tag .* together with a digest/,
    why: 'upstream ok (tag+digest); we refuse a tag next to the digest',
  },
  '': { reject: /empty/, why: 'upstream ErrNameEmpty' },
  ':justtag': { reject: /no @sha256/, why: 'upstream ErrReferenceInvalidFormat; also no digest' },
  [`@sha256:${F}`]: { reject: /repository name is empty/, why: 'upstream ErrReferenceInvalidFormat' },
  'repo@sha256:ffffffffffffffffffffffffffffffffff': { reject: /64 hex digits/, why: 'upstream ErrDigestInvalidLength' },
  [`validname@invaliddigest:${F}`]: {
    reject: /algorithm "invaliddigest" is not accepted/,
    why: 'upstream ErrDigestUnsupported',
  },
  'Uppercase:tag': { reject: /no @sha256/, why: 'upstream ErrNameContainsUppercase; a tag, no digest' },
  'test:5000/Uppercase/lowercase:tag': {
    reject: /no @sha256/,
    why: 'upstream ErrNameContainsUppercase; a tag, no digest',
  },
  [`${'a/'.repeat(128)}a:tag`]: {
    reject: /no @sha256/,
    why: 'upstream ErrNameTooLong; a tag, no digest (the length rule is tested below with a digest)',
  },
  'aa/asdf$$^/aa': { reject: /no @sha256/, why: 'upstream ErrReferenceInvalidFormat' },
  [`xn--7o8h.com/myimage:xn--7o8h.com@sha512:${'f'.repeat(128)}`]: {
    reject: /only sha256/,
    why: 'upstream ok (tag + sha512); we accept neither a tag nor sha512',
  },
  [`[2001:db8::1]:5000/repo@sha256:${F}`]: {
    ok: { repository: '[2001:db8::1]:5000/repo', registry: '[2001:db8::1]:5000', path: 'repo' },
  },
  '[fe80::1%eth0]:5000/repo': {
    reject: /no @sha256/,
    why: 'upstream ErrReferenceInvalidFormat (zone); no digest either',
  },
  'test.com:5000': { reject: /no @sha256/, why: 'upstream ok (5000 parsed as a tag); no digest' },
};

/** Our verdict for every upstream digest case: only sha256 with 64 lower-case hex digits. */
const DIGEST_OK = new Set(['sha256:e58fcf7418d4390dec8e8fb69d88c06ec07039d651fedd3aa72af9972e7d046b']);

describe('upstream distribution/reference cases', () => {
  it('every upstream case has a verdict of ours, and nothing else is mapped', () => {
    expect(corpus.reference.length).toBeGreaterThan(10);
    expect(Object.keys(REFERENCE_VERDICTS).sort()).toEqual(corpus.reference.map((c) => c.input).sort());
  });

  it.each(corpus.reference)('$input (upstream: $upstream)', ({ input, upstream }) => {
    const ours = REFERENCE_VERDICTS[input]!;
    if ('ok' in ours) {
      expect(upstream).toMatch(/^ok/);
      const parsed = parseDigestReference(input);
      expect(parsed).toEqual({ ...ours.ok, digest: `sha256:${F}`, reference: input });
      expect(isDigestReference(input)).toBe(true);
    } else {
      let err: unknown;
      try {
        parseDigestReference(input);
      } catch (e) {
        err = e;
      }
      expect(err, ours.why).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).code).toBe('RUNTIME_IMAGE_NOT_DIGEST');
      expect((err as ValidationError).issues.join('\n')).toMatch(ours.reject);
      expect(isDigestReference(input)).toBe(false);
    }
  });
});

describe('upstream go-digest cases', () => {
  it.each(corpus.digest)('$input (upstream: $upstream)', ({ input, upstream }) => {
    if (DIGEST_OK.has(input)) {
      expect(upstream).toBe('ok');
      expect(parseDigest(input)).toBe(input);
      expect(parseDigestReference(`localhost:5000/runtimes/python@${input}`).digest).toBe(input);
    } else {
      expect(() => parseDigest(input)).toThrow(expect.objectContaining({ code: 'RUNTIME_IMAGE_NOT_DIGEST' }));
      expect(isDigestReference(`repo@${input}`)).toBe(false);
    }
  });

  it('upper-case hex is refused with a reason that says so', () => {
    expect(digestReferenceIssues(`repo@sha256:${'E'.repeat(64)}`)).toEqual(['digest hex must be lower case']);
  });
});

describe('our own cases', () => {
  it('accepts the references scripts/images/*.sh print and Docker Hub-style names', () => {
    expect(parseDigestReference(`localhost:5000/runlog/python-runtime@sha256:${F}`)).toEqual({
      repository: 'localhost:5000/runlog/python-runtime',
      registry: 'localhost:5000',
      path: 'runlog/python-runtime',
      digest: `sha256:${F}`,
      reference: `localhost:5000/runlog/python-runtime@sha256:${F}`,
    });
    const hub = parseDigestReference(`library/python@sha256:${F}`);
    expect(hub.registry).toBeUndefined();
    expect(effectiveRegistry(hub)).toBe('docker.io');
    expect(parseDigestReference(`localhost/x@sha256:${F}`).registry).toBe('localhost');
    expect(parseDigestReference(`ghcr.io/a__b/c.d-e@sha256:${F}`).path).toBe('a__b/c.d-e');
  });

  it('refuses names longer than 255 characters even with a digest', () => {
    expect(() => parseDigestReference(`${'a/'.repeat(128)}a@sha256:${F}`)).toThrow(/longer than 255/);
  });

  it('refuses whitespace, two digests, bad ports, bad separators, empty components, non-strings', () => {
    for (const ref of [
      ` repo@sha256:${F}`,
      `repo@sha256:${F}\n`,
      `repo@sha256:${F}@sha256:${F}`,
      `host:99999/repo@sha256:${F}`,
      `host:/repo@sha256:${F}`,
      `-host.com/repo@sha256:${F}`,
      `repo-@sha256:${F}`,
      `a//b@sha256:${F}`,
      `a/b/@sha256:${F}`,
      `re..po@sha256:${F}`,
      `repo@sha256:${F}0`,
      `repo@SHA256:${F}`,
    ]) {
      expect(isDigestReference(ref), JSON.stringify(ref)).toBe(false);
    }
    expect(() => parseDigestReference(42 as unknown as string)).toThrow(
      expect.objectContaining({ code: 'RUNTIME_IMAGE_NOT_DIGEST' }),
    );
  });

  it('lists every problem, not only the first', () => {
    const issues = digestReferenceIssues(`Bad:tag@sha512:${'F'.repeat(10)}`);
    expect(issues.length).toBeGreaterThanOrEqual(3);
    expect(issues.join('\n')).toMatch(/tag/);
    expect(issues.join('\n')).toMatch(/only sha256/);
    expect(issues.join('\n')).toMatch(/64 hex digits/);
  });
});
