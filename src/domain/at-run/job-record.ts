// The V2 job record (`dev.mainasara.at-run.beta.v2.job`), its validation, and whether this runner takes it.
// Lexicon: lexicons/dev.mainasara.at-run.beta.v2.job.json (same fields).
//
//   $type      'dev.mainasara.at-run.beta.v2.job'
//   code       at-uri of a code record or of an alias record (the alias is resolved when the job runs)
//   codeCid?   the code record must have exactly this CID (dag-cbor CIDv1)
//   handler    the handler to call, an identifier (the worker protocol's rule, stricter than the lexicon's length)
//   input?     the JSON passed to the handler, within the operator policy's input limits (INPUT_TOO_LARGE /
//              INPUT_INVALID, the codes an execution's input is refused with)
//   runner?    the DID of the runner asked to run it; absent, any runner may pick it up
//   secrets?   strong ref { uri, cid } to a dev.mainasara.at-run.beta.v2.secrets record
//   resultKey? an X25519 public key as a did:key: the result blob is sealed to it (sealed-result.ts)
//   notAfter?  RFC 3339 datetime: the job must not start after it
//   createdAt  RFC 3339 datetime
//
// Records are closed: unknown fields are refused, and every violation is collected. jobAdmission then says what
// this runner does with a valid job: take it, ignore it (someone else's, or unaddressed while the policy takes
// only addressed jobs: no receipt, it is not ours to answer), or refuse it with a typed code that a receipt names.

import { RunlogError } from '../errors.ts';
import { snapshotJsonInput } from '../json-input.ts';
import { CODE_RECORD_NSID, HANDLER_NAME_RE, type StrongRef } from './code-record.ts';
import type { InputLimits, JobIntakePolicy } from './operator-policy.ts';
import { DAG_CBOR_CODEC, cidIssues, isDatetime, isDid, parseRecordUriOf } from './record-syntax.ts';
import { resultKeyIssues } from './sealed-result.ts';
import {
  RecordValidationError,
  ViolationList,
  isPlainObject,
  unknownKeys,
  type RecordViolation,
} from './record-violations.ts';

export const JOB_RECORD_NSID = 'dev.mainasara.at-run.beta.v2.job';
const ALIAS_RECORD_NSID = 'dev.mainasara.at-run.beta.v2.alias';
const SECRETS_RECORD_NSID = 'dev.mainasara.at-run.beta.v2.secrets';

export interface JobRecord {
  $type: typeof JOB_RECORD_NSID;
  code: string;
  codeCid?: string;
  handler: string;
  /** A plain copy of the record's input, the one that was checked against the limits. */
  input?: unknown;
  runner?: string;
  secrets?: StrongRef;
  /** The caller's X25519 public key (did:key) the result is sealed to; absent, the result is in clear. */
  resultKey?: string;
  notAfter?: string;
  createdAt: string;
}

/** What the job's `code` URI names: a code record, or an alias to resolve (one hop) when the job runs. */
export interface JobCodeTarget {
  kind: 'code' | 'alias';
  did: string;
  rkey: string;
}

export interface JobRecordCheck {
  ok: boolean;
  violations: RecordViolation[];
  record?: JobRecord;
  codeTarget?: JobCodeTarget;
}

const JOB_KEYS = [
  '$type',
  'code',
  'codeCid',
  'handler',
  'input',
  'runner',
  'secrets',
  'resultKey',
  'notAfter',
  'createdAt',
];

function checkCode(list: ViolationList, code: unknown, codeCid: unknown): JobCodeTarget | undefined {
  let target: JobCodeTarget | undefined;
  const asCode = parseRecordUriOf(code, CODE_RECORD_NSID);
  const asAlias = asCode ? null : parseRecordUriOf(code, ALIAS_RECORD_NSID);
  if (asCode) target = { kind: 'code', ...asCode };
  else if (asAlias) target = { kind: 'alias', ...asAlias };
  else
    list.add(
      'JOB_CODE_REF_INVALID',
      'code',
      `code must be at://<did>/${CODE_RECORD_NSID}/<rkey> or at://<did>/${ALIAS_RECORD_NSID}/<rkey> (got ${JSON.stringify(code)})`,
    );
  if (codeCid !== undefined)
    for (const issue of cidIssues(codeCid, DAG_CBOR_CODEC))
      list.add('JOB_CODE_REF_INVALID', 'codeCid', `codeCid ${issue}`);
  return target;
}

function checkSecrets(list: ViolationList, secrets: unknown): void {
  if (secrets === undefined) return;
  if (!isPlainObject(secrets)) {
    list.add('JOB_SECRETS_REF_INVALID', 'secrets', 'secrets must be a strong ref { uri, cid }');
    return;
  }
  unknownKeys(list, 'JOB_SECRETS_REF_INVALID', 'secrets', secrets, ['uri', 'cid', '$type']);
  if (secrets.$type !== undefined && secrets.$type !== 'com.atproto.repo.strongRef')
    list.add(
      'JOB_SECRETS_REF_INVALID',
      'secrets.$type',
      'secrets.$type must be com.atproto.repo.strongRef when present',
    );
  if (!parseRecordUriOf(secrets.uri, SECRETS_RECORD_NSID))
    list.add(
      'JOB_SECRETS_REF_INVALID',
      'secrets.uri',
      `secrets.uri must be at://<did>/${SECRETS_RECORD_NSID}/<rkey> (got ${JSON.stringify(secrets.uri)})`,
    );
  for (const issue of cidIssues(secrets.cid, DAG_CBOR_CODEC))
    list.add('JOB_SECRETS_REF_INVALID', 'secrets.cid', `secrets.cid ${issue}`);
}

/** The input checked as an execution's input is (json-input.ts); its plain copy, or undefined when refused. */
function checkInput(list: ViolationList, input: unknown, limits: InputLimits): { value: unknown } | undefined {
  if (input === undefined) return undefined;
  try {
    return { value: snapshotJsonInput(input, limits, 'input').value };
  } catch (err) {
    if (!(err instanceof RunlogError)) throw err;
    list.add(err.code === 'INPUT_TOO_LARGE' ? 'INPUT_TOO_LARGE' : 'INPUT_INVALID', 'input', err.message);
    return undefined;
  }
}

/** Checks every rule of a job record (its input against `limits`) and collects every violation. Never throws. */
export function validateJobRecord(value: unknown, limits: { input: InputLimits }): JobRecordCheck {
  const list = new ViolationList();
  if (!isPlainObject(value)) {
    list.add('JOB_RECORD_INVALID', '', 'a job record must be an object');
    return { ok: false, violations: list.items };
  }
  unknownKeys(list, 'JOB_RECORD_INVALID', '', value, JOB_KEYS);
  if (value.$type !== JOB_RECORD_NSID)
    list.add('JOB_RECORD_INVALID', '$type', `$type must be ${JOB_RECORD_NSID} (got ${JSON.stringify(value.$type)})`);
  const codeTarget = checkCode(list, value.code, value.codeCid);
  if (typeof value.handler !== 'string' || !HANDLER_NAME_RE.test(value.handler))
    list.add('HANDLER_INVALID', 'handler', `handler must be an identifier (got ${JSON.stringify(value.handler)})`);
  const input = checkInput(list, value.input, limits.input);
  if (value.runner !== undefined && !isDid(value.runner))
    list.add('JOB_RECORD_INVALID', 'runner', `runner must be a DID (got ${JSON.stringify(value.runner)})`);
  checkSecrets(list, value.secrets);
  if (value.resultKey !== undefined)
    for (const issue of resultKeyIssues(value.resultKey))
      list.add('JOB_RESULT_KEY_INVALID', 'resultKey', `resultKey must be an X25519 public key as a did:key: ${issue}`);
  for (const key of ['notAfter', 'createdAt'] as const) {
    const v = value[key];
    if ((key === 'createdAt' || v !== undefined) && !isDatetime(v))
      list.add('JOB_RECORD_INVALID', key, `${key} must be an RFC 3339 datetime (got ${JSON.stringify(v)})`);
  }
  if (!list.ok || !codeTarget) return { ok: false, violations: list.items };
  // why: every field was checked above (list.ok); the input is replaced by the copy that was checked
  const record = { ...value, ...(input ? { input: input.value } : {}) } as unknown as JobRecord;
  return { ok: true, violations: [], record, codeTarget };
}

/** Validates and returns the typed record; throws RecordValidationError listing every violation. */
export function assertJobRecord(value: unknown, limits: { input: InputLimits }): JobRecord {
  const check = validateJobRecord(value, limits);
  if (!check.ok || !check.record) throw new RecordValidationError('job record', check.violations);
  return check.record;
}

/** Why a job is not this runner's to take or to answer. */
export type JobIgnoreReason =
  | 'other-runner' // addressed to another runner's DID: that runner answers it
  | 'unaddressed'; // names no runner, and this runner's policy takes only jobs addressed to it

/** What this runner does with a valid job record. */
export type JobAdmission =
  | { kind: 'take' }
  | { kind: 'ignore'; why: JobIgnoreReason }
  | { kind: 'refuse'; code: 'JOB_EXPIRED'; message: string };

export interface JobAdmissionContext {
  /** This runner's DID (the repo its runner record is in). */
  runnerDid: string;
  policy: { jobs: Pick<JobIntakePolicy, 'acceptUnaddressed'> };
  /** Now, in ms since the epoch. */
  now: number;
}

/**
 * Whether this runner takes `job`. A job for another runner, or an unaddressed one while `jobs.acceptUnaddressed`
 * is off, is ignored: another runner may take it, so answering it would be speaking for someone else. A job this
 * runner would take whose `notAfter` has passed is refused with JOB_EXPIRED (the caller is owed a receipt).
 */
export function jobAdmission(
  job: Pick<JobRecord, 'runner' | 'notAfter'>,
  { runnerDid, policy, now }: JobAdmissionContext,
): JobAdmission {
  if (job.runner !== undefined && job.runner !== runnerDid) return { kind: 'ignore', why: 'other-runner' };
  if (job.runner === undefined && !policy.jobs.acceptUnaddressed) return { kind: 'ignore', why: 'unaddressed' };
  if (job.notAfter !== undefined) {
    const deadline = Date.parse(job.notAfter);
    if (!(deadline >= now))
      return {
        kind: 'refuse',
        code: 'JOB_EXPIRED',
        message: `the job must not start after ${job.notAfter}, and it is now ${new Date(now).toISOString()}`,
      };
  }
  return { kind: 'take' };
}
