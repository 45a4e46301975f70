// Job records (dev.mainasara.at-run.beta.v2.job): their validation, every violation listed, the input held to the
// policy's limits, the Lexicon agreeing with the validator, and whether this runner takes, ignores or refuses one.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import * as dagCbor from '@ipld/dag-cbor';
import { schemas } from '@atproto/api';
import { Lexicons, jsonToLex, parseLexiconDoc } from '@atproto/lexicon';
import { CID } from 'multiformats/cid';
import { sha256 } from 'multiformats/hashes/sha2';
import { beforeAll, describe, expect, it } from 'vitest';
import { exitStatusOf, httpStatusOf } from '../../../src/domain/error-codes.ts';
import { JobRefusedError, ValidationError } from '../../../src/domain/errors.ts';
import { RecordValidationError } from '../../../src/domain/at-run/record-violations.ts';
import { CODE_RECORD_NSID } from '../../../src/domain/at-run/code-record.ts';
import { DEFAULT_OPERATOR_POLICY } from '../../../src/domain/at-run/operator-policy.ts';
import { encodeX25519DidKey, X25519PrivateKey } from '../../../src/domain/at-run/x25519-keys.ts';
import {
  JOB_RECORD_NSID,
  assertJobRecord,
  jobAdmission,
  validateJobRecord,
  type JobRecord,
} from '../../../src/domain/at-run/job-record.ts';

const REPO_ROOT = resolve(import.meta.dirname, '../../..');
const AUTHOR = 'did:plc:codeauthor00000000000000';
const CALLER = 'did:plc:caller000000000000000000';
const RUNNER = 'did:plc:runner000000000000000000';
const OTHER_RUNNER = 'did:web:other-runner.example.com';
const CODE_URI = `at://${AUTHOR}/${CODE_RECORD_NSID}/3lcode`;
const ALIAS_URI = `at://${AUTHOR}/dev.mainasara.at-run.beta.v2.alias/latest`;
const SECRETS_URI = `at://${CALLER}/dev.mainasara.at-run.beta.v2.secrets/3lsecrets`;
const RESULT_KEY = X25519PrivateKey.generate().publicKey;
const limits = { input: DEFAULT_OPERATOR_POLICY.input };

let codeCid: string;
let secretsCid: string;

beforeAll(async () => {
  codeCid = CID.create(1, dagCbor.code, await sha256.digest(dagCbor.encode({ code: true }))).toString();
  secretsCid = CID.create(1, dagCbor.code, await sha256.digest(dagCbor.encode({ secrets: true }))).toString();
});

function job(over: Record<string, unknown> = {}): Record<string, unknown> {
  const full: Record<string, unknown> = {
    $type: JOB_RECORD_NSID,
    code: CODE_URI,
    codeCid,
    handler: 'main',
    input: { n: 2, words: ['a', 'b'] },
    runner: RUNNER,
    secrets: { uri: SECRETS_URI, cid: secretsCid },
    resultKey: RESULT_KEY,
    notAfter: '2026-12-01T12:00:00.000Z',
    createdAt: '2026-12-01T11:00:00.000Z',
    ...over,
  };
  for (const [k, v] of Object.entries(full)) if (v === undefined) delete full[k];
  return full;
}

function violationsOf(value: unknown, lim = limits): { code: string; path: string }[] {
  return validateJobRecord(value, lim).violations.map(({ code, path }) => ({ code, path }));
}

describe('validating a job record', () => {
  it('accepts a complete record and names what its code URI points at', () => {
    const check = validateJobRecord(job(), limits);
    expect(check.ok).toBe(true);
    expect(check.violations).toEqual([]);
    expect(check.record).toEqual(job());
    expect(check.codeTarget).toEqual({ kind: 'code', did: AUTHOR, rkey: '3lcode' });
  });

  it('accepts the minimal record, and an alias as its code', () => {
    const minimal = { $type: JOB_RECORD_NSID, code: ALIAS_URI, handler: 'main', createdAt: '2026-12-01T11:00:00Z' };
    const check = validateJobRecord(minimal, limits);
    expect(check.ok).toBe(true);
    expect(check.record).toEqual(minimal);
    expect(check.codeTarget).toEqual({ kind: 'alias', did: AUTHOR, rkey: 'latest' });
  });

  it('lists every violation at once, each with its code and path', () => {
    const bad = job({
      $type: 'dev.mainasara.at-run.beta.v2.code',
      code: `at://${AUTHOR}/dev.mainasara.at-run.beta.v2.runtime/3lr`,
      codeCid: 'not-a-cid',
      handler: 'no spaces',
      runner: 'alice',
      secrets: { uri: CODE_URI, cid: codeCid, extra: 1 },
      resultKey: 'did:plc:notakey',
      notAfter: 'tomorrow',
      createdAt: 12,
      colour: 'blue',
    });
    expect(violationsOf(bad)).toEqual([
      { code: 'JOB_RECORD_INVALID', path: 'colour' },
      { code: 'JOB_RECORD_INVALID', path: '$type' },
      { code: 'JOB_CODE_REF_INVALID', path: 'code' },
      { code: 'JOB_CODE_REF_INVALID', path: 'codeCid' },
      { code: 'HANDLER_INVALID', path: 'handler' },
      { code: 'JOB_RECORD_INVALID', path: 'runner' },
      { code: 'JOB_SECRETS_REF_INVALID', path: 'secrets.extra' },
      { code: 'JOB_SECRETS_REF_INVALID', path: 'secrets.uri' },
      { code: 'JOB_RESULT_KEY_INVALID', path: 'resultKey' },
      { code: 'JOB_RECORD_INVALID', path: 'notAfter' },
      { code: 'JOB_RECORD_INVALID', path: 'createdAt' },
    ]);
  });

  it('refuses what is not an object, and a record missing its required fields', () => {
    expect(violationsOf([job()])).toEqual([{ code: 'JOB_RECORD_INVALID', path: '' }]);
    expect(violationsOf(null)).toEqual([{ code: 'JOB_RECORD_INVALID', path: '' }]);
    expect(violationsOf({ $type: JOB_RECORD_NSID })).toEqual([
      { code: 'JOB_CODE_REF_INVALID', path: 'code' },
      { code: 'HANDLER_INVALID', path: 'handler' },
      { code: 'JOB_RECORD_INVALID', path: 'createdAt' },
    ]);
  });

  it('holds a codeCid and the secrets CID to canonical dag-cbor CIDv1', async () => {
    const raw = CID.create(1, 0x55, await sha256.digest(new Uint8Array([1]))).toString();
    const upper = CID.parse(codeCid).toString().toUpperCase();
    expect(violationsOf(job({ codeCid: raw }))).toEqual([{ code: 'JOB_CODE_REF_INVALID', path: 'codeCid' }]);
    expect(violationsOf(job({ codeCid: upper }))).toEqual([{ code: 'JOB_CODE_REF_INVALID', path: 'codeCid' }]);
    expect(violationsOf(job({ secrets: { uri: SECRETS_URI, cid: raw } }))).toEqual([
      { code: 'JOB_SECRETS_REF_INVALID', path: 'secrets.cid' },
    ]);
    expect(violationsOf(job({ secrets: 'at://x' }))).toEqual([{ code: 'JOB_SECRETS_REF_INVALID', path: 'secrets' }]);
  });

  it('holds a resultKey to a usable X25519 did:key, saying why another is not one', () => {
    const ed25519 = 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK';
    const lowOrder = encodeX25519DidKey(new Uint8Array(32));
    for (const resultKey of [ed25519, lowOrder, `${RESULT_KEY}x`, 'did:plc:caller', 42, '', null])
      expect(violationsOf(job({ resultKey })), String(resultKey)).toEqual([
        { code: 'JOB_RESULT_KEY_INVALID', path: 'resultKey' },
      ]);
    const [low] = validateJobRecord(job({ resultKey: lowOrder }), limits).violations;
    expect(low?.message).toBe(
      `resultKey must be an X25519 public key as a did:key: ${lowOrder} is a low-order point, not a usable key`,
    );
    const [other] = validateJobRecord(job({ resultKey: ed25519 }), limits).violations;
    expect(other?.message).toContain('is not an x25519-pub key');
    expect(validateJobRecord(job({ resultKey: RESULT_KEY }), limits).record?.resultKey).toBe(RESULT_KEY);
    expect(exitStatusOf('JOB_RESULT_KEY_INVALID')).toBe(2);
  });

  it("holds the input to the operator policy's input limits, with the codes an execution's input gets", () => {
    const small = { input: { maxBytes: 64, maxDepth: 3 } };
    expect(violationsOf(job({ input: { text: 'x'.repeat(100) } }), small)).toEqual([
      { code: 'INPUT_TOO_LARGE', path: 'input' },
    ]);
    expect(violationsOf(job({ input: [[[[1]]]] }), small)).toEqual([{ code: 'INPUT_INVALID', path: 'input' }]);
    expect(violationsOf(job({ input: [[[1]]] }), small)).toEqual([]);
    // Any JSON value, null included, is an input; only an absent one is no input.
    expect(validateJobRecord(job({ input: null }), limits).record?.input).toBeNull();
    expect('input' in validateJobRecord(job({ input: undefined }), limits).record!).toBe(false);
  });

  it('keeps the copy of the input that was checked, not the caller object', () => {
    const input = { n: 1 };
    const record = assertJobRecord(job({ input }), limits);
    input.n = 2;
    expect(record.input).toEqual({ n: 1 });
  });

  it('assertJobRecord throws a RecordValidationError whose code is the first violation', () => {
    let err: unknown;
    try {
      assertJobRecord(job({ handler: 7, createdAt: 'x' }), limits);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RecordValidationError);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as RecordValidationError).code).toBe('HANDLER_INVALID');
    expect((err as RecordValidationError).codes).toEqual(['HANDLER_INVALID', 'JOB_RECORD_INVALID']);
    expect((err as RecordValidationError).message).toBe(
      'invalid job record (2 problems):\n' +
        '  - HANDLER_INVALID at handler: handler must be an identifier (got 7)\n' +
        '  - JOB_RECORD_INVALID at createdAt: createdAt must be an RFC 3339 datetime (got "x")',
    );
  });
});

describe('the job Lexicon matches the validator', () => {
  const doc = JSON.parse(
    readFileSync(resolve(REPO_ROOT, 'lexicons/dev.mainasara.at-run.beta.v2.job.json'), 'utf8'),
  ) as Record<string, any>;
  const strongRef = schemas.find((s) => s.id === 'com.atproto.repo.strongRef')!;
  const lex = new Lexicons([doc as any, strongRef]);

  it('is a valid Lexicon (format 1) for the job NSID', () => {
    expect(doc.lexicon).toBe(1);
    expect(doc.id).toBe(JOB_RECORD_NSID);
    expect(() => parseLexiconDoc(doc)).not.toThrow();
  });

  it('accepts what our validator accepts, field for field', () => {
    const value = job();
    lex.assertValidRecord(JOB_RECORD_NSID, jsonToLex(JSON.parse(JSON.stringify(value))));
    expect(
      Object.keys(value)
        .filter((k) => k !== '$type')
        .sort(),
    ).toEqual(Object.keys(doc.defs.main.record.properties).sort());
  });

  it('requires what our validator requires', () => {
    for (const field of doc.defs.main.record.required as string[]) {
      const value = job({ [field]: undefined });
      expect(() => lex.assertValidRecord(JOB_RECORD_NSID, jsonToLex(value)), field).toThrow();
      expect(validateJobRecord(value, limits).ok, field).toBe(false);
    }
  });
});

describe('jobAdmission: whether this runner takes a job', () => {
  const NOW = Date.parse('2026-12-01T11:30:00.000Z');
  const addressed = (over: Partial<JobRecord> = {}): Pick<JobRecord, 'runner' | 'notAfter'> => ({
    runner: RUNNER,
    ...over,
  });
  const ctx = (acceptUnaddressed = false) => ({
    runnerDid: RUNNER,
    policy: { jobs: { acceptUnaddressed } },
    now: NOW,
  });

  it('takes a job addressed to this runner', () => {
    expect(jobAdmission(addressed(), ctx())).toEqual({ kind: 'take' });
    expect(jobAdmission(addressed({ notAfter: '2026-12-01T11:30:00.000Z' }), ctx())).toEqual({ kind: 'take' });
  });

  it('ignores a job addressed to another runner, even when it takes unaddressed ones or it expired', () => {
    expect(jobAdmission(addressed({ runner: OTHER_RUNNER }), ctx(true))).toEqual({
      kind: 'ignore',
      why: 'other-runner',
    });
    expect(jobAdmission(addressed({ runner: OTHER_RUNNER, notAfter: '2020-01-01T00:00:00Z' }), ctx())).toEqual({
      kind: 'ignore',
      why: 'other-runner',
    });
  });

  it('takes an unaddressed job only when the policy says so (off by default)', () => {
    expect(DEFAULT_OPERATOR_POLICY.jobs.acceptUnaddressed).toBe(false);
    expect(jobAdmission({}, { ...ctx(), policy: DEFAULT_OPERATOR_POLICY })).toEqual({
      kind: 'ignore',
      why: 'unaddressed',
    });
    expect(jobAdmission({}, ctx(true))).toEqual({ kind: 'take' });
  });

  it('refuses a job of its own whose notAfter has passed, with JOB_EXPIRED and the times in the message', () => {
    const decision = jobAdmission(addressed({ notAfter: '2026-12-01T11:29:59.999Z' }), ctx());
    expect(decision).toEqual({
      kind: 'refuse',
      code: 'JOB_EXPIRED',
      message: 'the job must not start after 2026-12-01T11:29:59.999Z, and it is now 2026-12-01T11:30:00.000Z',
    });
    expect(jobAdmission({ notAfter: '2026-12-01T11:00:00+01:00' }, ctx(true))).toMatchObject({
      kind: 'refuse',
      code: 'JOB_EXPIRED',
    });
  });

  it('a refusal becomes a JobRefusedError of a timeout category when it is thrown', () => {
    const err = new JobRefusedError('JOB_EXPIRED', 'expired');
    expect(err.code).toBe('JOB_EXPIRED');
    expect(httpStatusOf(err.code)).toBe(504);
    expect(exitStatusOf('JOB_RATE_LIMITED')).toBe(1);
    expect(httpStatusOf('JOB_RATE_LIMITED')).toBe(503);
  });
});
