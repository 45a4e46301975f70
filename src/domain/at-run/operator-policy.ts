// The runner operator's policy: one JSON file, the only place an operator configures what at-run accepts.
//
// {
//   "protocolVersions": [1],                        worker protocol versions accepted (subset of [1])
//   "platforms": [{ "os": "linux", "architecture": "amd64" }],
//                                                    daemon platforms this runner serves; an entry without
//                                                    "variant" accepts any variant of that os/architecture
//   "publishers": ["*"],                             DIDs allowed to publish runtime records ("*" = any)
//   "registries": ["localhost:5000"],                registries runtime and addition images may come from
//                                                    ("*" = any; a name without a host means "docker.io")
//   "archive": { maxArchiveBytes, maxEntries, maxExpandedBytes, maxFileBytes },
//   "ceilings": { memoryMb, cpus, pids, timeoutMs, stdoutBytes, stderrBytes, frameBytes, frameDepth },
//   "input": { maxBytes, maxDepth },                 an execution's input: encoded JSON size and nesting, checked
//                                                    before anything is appended (INPUT_TOO_LARGE / INPUT_INVALID)
//   "defaults": { memoryMb, cpus, pids, timeoutMs },  used where the code record requests nothing
//   "limitMode": "clamp" | "reject",                 a request above a ceiling is lowered, or refused
//   "isolation": "runc" | "runsc",                   OCI runtime of the sandbox (runsc = gVisor)
//   "prestart": { perCode, total, maxMemoryMb, idleMs, idleCpuMs, publishers },
//                                                    pre-started sandboxes; idleCpuMs: the CPU one may use while
//                                                    it waits (more: removed, its code not pre-started again);
//                                                    publishers: the runtime publishers (DIDs) whose runtimes
//                                                    may be started ahead of a request
//   "executions": { maxRunning, maxQueued },         executions running at once on one supervisor (a cluster
//                                                    node's default --exec-limit too) and waiting for a place
//   "jobs": { acceptUnaddressed, perRepoPerMinute, maxQueued }
//                                                    job records taken from the network: whether a job that names
//                                                    no runner is taken (default false: only jobs addressed to this
//                                                    runner's DID), how many jobs one repo may submit per minute
//                                                    (JOB_RATE_LIMITED beyond it, job-rate.ts), and how many taken
//                                                    jobs may wait to run
//   "network": { destinations, allowRanges, limits }  where executions that ask for network may connect, through
//                                                    the egress proxy (egress-policy.ts); none by default
// }
//
// Allow-lists fail closed: an EMPTY list allows nothing, and "*" must be written to allow everything. The
// default policy allows any publisher ("*": runtime records are public, content-addressed configuration;
// their bytes are digest-pinned, archive-validated, never started, and only ever read inside the hardened
// sandbox) but only the local registry, so the supply-chain gate is the registry list. Fields omitted from
// the file take the default values below; unknown fields are errors (a typo in a security setting must not
// be silently ignored). Network access is granted only to the destinations `network` lists, and only through the
// enforcing egress proxy (docs/decisions/0012): with none listed (the default) a code record requesting network
// fails closed with NETWORK_NOT_ALLOWED.
//
// Pre-starting runs a runtime's launcher before any request: whatever the launcher loads (a runtime author can
// point it at a file in the code, `--import=<file>`) runs while the sandbox waits, charged to no execution. So
// `prestart.publishers` is its own, narrower list, and its default is EMPTY: no runtime is pre-started until the
// operator names the publishers whose runtimes it trusts to idle quietly (their own DID, say). "*" is accepted
// but must be written. Even a trusted runtime is held to it: a waiting sandbox that uses more than
// `prestart.idleCpuMs` of CPU is removed, and its code is not pre-started again by that supervisor.//
// Reading the file is here (parseOperatorPolicy, one function per section); what the policy then says about a
// code record and its runtime (limits, publishers, registries, platforms) is in policy-admission.ts.

import { ValidationError } from '../errors.ts';
import { MAX_JSON_DEPTH } from '../json-input.ts';
import { DEFAULT_ARCHIVE_LIMITS, archiveLimitsIssues, type ArchiveLimits } from './archive-limits.ts';
import { DEFAULT_NETWORK_POLICY, parseNetworkPolicy, type NetworkPolicy } from './egress-policy.ts';
import type { NetworkGrant } from './egress-grant.ts';
import { isDid } from './record-syntax.ts';
import { SUPPORTED_PROTOCOL_VERSIONS, type OciPlatform } from './runtime-record.ts';

export type LimitMode = 'clamp' | 'reject';
export type Isolation = 'runc' | 'runsc';

export interface ResourceCeilings {
  memoryMb: number;
  /** May be fractional (1.5 CPUs). */
  cpus: number;
  pids: number;
  timeoutMs: number;
  stdoutBytes: number;
  stderrBytes: number;
  /** Largest protocol frame (one newline-delimited JSON object) accepted on stdout. Below stdoutBytes by default. */
  frameBytes: number;
  /** Deepest nesting of arrays/objects in a frame the worker writes (FRAME_TOO_DEEP beyond it). */
  frameDepth: number;
}

/** What a caller may send as an execution's input. */
export interface InputLimits {
  /** Encoded JSON size in bytes. */
  maxBytes: number;
  /** Nesting of arrays and objects. */
  maxDepth: number;
}

/** Room in the invocation envelope for everything but the input (URI, CIDs, handler, caller DID, deadline). */
export const ENVELOPE_OVERHEAD_BYTES = 64 * 1024;

export type ResourceDefaults = Pick<ResourceCeilings, 'memoryMb' | 'cpus' | 'pids' | 'timeoutMs'>;

export interface OperatorPolicy {
  protocolVersions: number[];
  platforms: OciPlatform[];
  publishers: string[];
  registries: string[];
  archive: ArchiveLimits;
  ceilings: ResourceCeilings;
  defaults: ResourceDefaults;
  input: InputLimits;
  limitMode: LimitMode;
  isolation: Isolation;
  /** Pre-started one-shot sandboxes (supervisor/executions/pool/sandbox-pool.ts). */
  prestart: PrestartPolicy;
  /** How many executions run at once on one supervisor, and how many wait for a place (supervisor/executions/execution-limiter.ts). */
  executions: ExecutionConcurrency;
  /** Job records taken from the network (job-record.ts jobAdmission, job-rate.ts). */
  jobs: JobIntakePolicy;
  /** Where executions that ask for network may connect through the egress proxy, and their limits (egress-policy.ts). */
  network: NetworkPolicy;
}

/** Which job records this runner takes from the network, and how fast and how many. */
export interface JobIntakePolicy {
  /** Take jobs that name no runner (any runner may pick them up). Off by default: only jobs addressed to this runner. */
  acceptUnaddressed: boolean;
  /** Jobs one repo (the caller's DID) may submit per minute, as a token bucket of this size refilled over a minute. */
  perRepoPerMinute: number;
  /** Jobs taken and waiting to run: the bound on the intake's queue. */
  maxQueued: number;
}

/** Executions at once per supervisor (each is one sandbox while it runs), and the line of those waiting. */
export interface ExecutionConcurrency {
  maxRunning: number;
  /** 0: none waits, one over maxRunning is refused at once. */
  maxQueued: number;
}

/**
 * How many sandboxes may wait, started and idle, for the next execution of a code: per code (its code CID,
 * runtime CID, limits and isolation), in total, and by the memory their limits reserve; and how long one may
 * wait before it is removed. perCode 0 (or total 0) turns pre-starting off.
 */
export interface PrestartPolicy {
  perCode: number;
  total: number;
  /** Sum of the memory limits of the waiting sandboxes. */
  maxMemoryMb: number;
  idleMs: number;
  /**
   * CPU (ms) a sandbox may use before its envelope arrives: a worker boots on far less, so more means the runtime
   * runs work of its own while it waits. Over it, the sandbox is removed and its key is not pre-started again.
   */
  idleCpuMs: number;
  /** Runtime publishers (DIDs, or "*") whose runtimes may be pre-started; empty (the default) pre-starts none. */
  publishers: string[];
}

/** What an execution gets: requested values within the ceilings, plus the non-requestable limits. */
export interface EffectiveLimits extends ResourceCeilings {
  /** The destinations, ranges and limits the egress proxy enforces for it (egress-grant.ts), or false: no network. */
  network: false | NetworkGrant;
}

export const WILDCARD = '*';

export const DEFAULT_OPERATOR_POLICY: Readonly<OperatorPolicy> = deepFreeze({
  protocolVersions: [1],
  platforms: [
    { os: 'linux', architecture: 'amd64' },
    { os: 'linux', architecture: 'arm64' },
  ],
  publishers: [WILDCARD],
  registries: ['localhost:5000', '127.0.0.1:5000'],
  archive: { ...DEFAULT_ARCHIVE_LIMITS },
  ceilings: {
    memoryMb: 512,
    cpus: 1,
    pids: 128,
    timeoutMs: 60_000,
    // A frame may be at most half of what stdout may carry, so FRAME_TOO_LARGE (one line too big) and
    // OUTPUT_LIMIT (too much in total) are different answers.
    stdoutBytes: 2 * 1024 * 1024,
    stderrBytes: 1024 * 1024,
    frameBytes: 1024 * 1024,
    frameDepth: 128,
  },
  defaults: { memoryMb: 256, cpus: 1, pids: 64, timeoutMs: 10_000 },
  input: { maxBytes: 1024 * 1024, maxDepth: 128 },
  limitMode: 'clamp',
  isolation: 'runc',
  prestart: { perCode: 1, total: 8, maxMemoryMb: 2048, idleMs: 60_000, idleCpuMs: 1000, publishers: [] },
  executions: { maxRunning: 8, maxQueued: 256 },
  jobs: { acceptUnaddressed: false, perRepoPerMinute: 60, maxQueued: 1000 },
  network: {
    destinations: [],
    allowRanges: [],
    limits: { ...DEFAULT_NETWORK_POLICY.limits },
  },
});

function deepFreeze<T>(o: T): T {
  if (typeof o === 'object' && o !== null) {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

const TOP_KEYS = [
  'protocolVersions',
  'platforms',
  'publishers',
  'registries',
  'archive',
  'ceilings',
  'defaults',
  'input',
  'limitMode',
  'isolation',
  'prestart',
  'executions',
  'jobs',
  'network',
] as const;
const PRESTART_KEYS = ['perCode', 'total', 'maxMemoryMb', 'idleMs', 'idleCpuMs'] as const;
const PRESTART_SETTINGS = [...PRESTART_KEYS, 'publishers'] as const;
const EXECUTIONS_KEYS = ['maxRunning', 'maxQueued'] as const;
/** As `runlog serve --exec-limit` allows. */
const MAX_RUNNING = 1000;
const MAX_QUEUED = 100_000;
const JOBS_KEYS = ['acceptUnaddressed', 'perRepoPerMinute', 'maxQueued'] as const;
/** Beyond these the bucket or the queue would be no bound at all. */
const MAX_JOBS_PER_MINUTE = 1_000_000;
const MAX_JOBS_QUEUED = 1_000_000;
const CEILING_KEYS = [
  'memoryMb',
  'cpus',
  'pids',
  'timeoutMs',
  'stdoutBytes',
  'stderrBytes',
  'frameBytes',
  'frameDepth',
] as const;
const INPUT_KEYS = ['maxBytes', 'maxDepth'] as const;
/** Bounds the supervisor itself needs: deeper values are not encoded safely, larger ones not held in memory. */
const MAX_INPUT_DEPTH = MAX_JSON_DEPTH;
const MAX_INPUT_BYTES = 64 * 1024 * 1024;
const DEFAULT_KEYS = ['memoryMb', 'cpus', 'pids', 'timeoutMs'] as const;
const PLATFORM_PART_RE = /^[a-z0-9][a-z0-9._-]{0,31}$/;
/** A host name's label, as a pattern: letters and digits, hyphens only inside (REGISTRY_RE names it twice). */
const HOST_LABEL = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const REGISTRY_RE = new RegExp(`^(?:${HOST_LABEL}(?:\\.${HOST_LABEL})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]{1,5})?$`);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A positive finite number (a safe integer when `integer`): a limit's value. */
export function positiveNumber(v: unknown, integer: boolean): v is number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 && (!integer || Number.isSafeInteger(v));
}

function unknown(issues: string[], where: string, obj: Record<string, unknown>, known: readonly string[]): void {
  for (const k of Object.keys(obj))
    if (!known.includes(k)) issues.push(`${where}${where ? '.' : ''}${k} is not a known setting`);
}

function stringList(
  issues: string[],
  where: string,
  v: unknown,
  valid: (s: string) => boolean,
  what: string,
): string[] | undefined {
  if (!Array.isArray(v)) {
    issues.push(`${where} must be an array of ${what} (use ["${WILDCARD}"] to allow any, [] to allow none)`);
    return undefined;
  }
  const out: string[] = [];
  v.forEach((s, i) => {
    if (typeof s !== 'string' || !(s === WILDCARD || valid(s)))
      issues.push(`${where}[${i}] ${JSON.stringify(s)} is not ${what} or "${WILDCARD}"`);
    else out.push(s);
  });
  return out;
}

/** `protocolVersions`: a non-empty list of versions this runner implements (the default's copy when invalid). */
function parseProtocolVersions(issues: string[], v: unknown, fallback: readonly number[]): number[] {
  if (!Array.isArray(v) || v.length === 0) {
    issues.push('protocolVersions must be a non-empty array');
    return [...fallback];
  }
  const protocolVersions: number[] = [];
  v.forEach((n, i) => {
    if (typeof n !== 'number' || !SUPPORTED_PROTOCOL_VERSIONS.includes(n))
      issues.push(
        `protocolVersions[${i}] ${JSON.stringify(n)} is not a protocol version this runner implements ` +
          `(${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
      );
    else protocolVersions.push(n);
  });
  return protocolVersions;
}

/** `platforms`: a non-empty list of OCI platforms `{ os, architecture, variant? }` (the default's copy when invalid). */
function parsePlatforms(
  issues: string[],
  v: unknown,
  fallback: OperatorPolicy['platforms'],
): OperatorPolicy['platforms'] {
  if (!Array.isArray(v) || v.length === 0) {
    issues.push('platforms must be a non-empty array of { os, architecture, variant? }');
    return fallback.map((p) => ({ ...p }));
  }
  const platforms: { os: string; architecture: string; variant?: string }[] = [];
  v.forEach((p, i) => {
    if (!isObject(p)) {
      issues.push(`platforms[${i}] must be an object { os, architecture, variant? }`);
      return;
    }
    unknown(issues, `platforms[${i}]`, p, ['os', 'architecture', 'variant']);
    let ok = true;
    for (const k of ['os', 'architecture'] as const) {
      if (typeof p[k] !== 'string' || !PLATFORM_PART_RE.test(p[k])) {
        issues.push(`platforms[${i}].${k} must be a lower-case OCI platform value`);
        ok = false;
      }
    }
    if (p.variant !== undefined && (typeof p.variant !== 'string' || !PLATFORM_PART_RE.test(p.variant))) {
      issues.push(`platforms[${i}].variant must be a lower-case OCI platform value when present`);
      ok = false;
    }
    if (ok)
      platforms.push({
        os: p.os as string,
        architecture: p.architecture as string,
        ...(p.variant !== undefined ? { variant: p.variant as string } : {}),
      });
  });
  return platforms;
}

/** `prestart`: the warm-pool settings over the defaults, and the publishers whose code is started ahead. */
function parsePrestart(issues: string[], v: unknown, d: PrestartPolicy): PrestartPolicy {
  const fallback = { ...d, publishers: [...d.publishers] };
  if (!isObject(v)) {
    issues.push('prestart must be an object { perCode, total, maxMemoryMb, idleMs, idleCpuMs, publishers }');
    return fallback;
  }
  unknown(issues, 'prestart', v, PRESTART_SETTINGS);
  const given = v.publishers;
  const trusted =
    given === undefined ? fallback.publishers : stringList(issues, 'prestart.publishers', given, isDid, 'a DID');
  const prestart = { ...d, ...(v as Partial<PrestartPolicy>), publishers: trusted ?? [] };
  for (const k of PRESTART_KEYS) {
    const n = prestart[k];
    const zeroOk = k === 'perCode' || k === 'total';
    if (!(typeof n === 'number' && Number.isSafeInteger(n) && (n > 0 || (zeroOk && n === 0))))
      issues.push(`prestart.${k} must be a ${zeroOk ? 'non-negative' : 'positive'} integer (got ${JSON.stringify(n)})`);
  }
  return prestart;
}

/** `archive`: the archive limits over the defaults (the defaults' copy when any is invalid). */
function parseArchive(issues: string[], v: unknown, d: ArchiveLimits): ArchiveLimits {
  const merged = isObject(v) ? { ...d, ...v } : v;
  const archiveIssues = archiveLimitsIssues(merged, 'archive');
  issues.push(...archiveIssues);
  return archiveIssues.length === 0 ? (merged as ArchiveLimits) : { ...d };
}

/** `ceilings`: the most an execution may get, over the defaults. */
function parseCeilings(issues: string[], v: unknown, d: ResourceCeilings): ResourceCeilings {
  if (!isObject(v)) {
    issues.push('ceilings must be an object');
    return { ...d };
  }
  unknown(issues, 'ceilings', v, CEILING_KEYS);
  const ceilings = { ...d, ...(v as Partial<ResourceCeilings>) };
  for (const k of CEILING_KEYS) {
    if (!positiveNumber(ceilings[k], k !== 'cpus'))
      issues.push(
        `ceilings.${k} must be a positive ${k === 'cpus' ? 'number' : 'integer'} (got ${JSON.stringify(ceilings[k])})`,
      );
  }
  return ceilings;
}

/** `defaults`: what an execution that requests nothing gets, over the defaults. */
function parseDefaults(issues: string[], v: unknown, d: ResourceDefaults): ResourceDefaults {
  if (!isObject(v)) {
    issues.push('defaults must be an object');
    return { ...d };
  }
  unknown(issues, 'defaults', v, DEFAULT_KEYS);
  const defaults = { ...d, ...(v as Partial<ResourceDefaults>) };
  for (const k of DEFAULT_KEYS) {
    if (!positiveNumber(defaults[k], k !== 'cpus'))
      issues.push(
        `defaults.${k} must be a positive ${k === 'cpus' ? 'number' : 'integer'} (got ${JSON.stringify(defaults[k])})`,
      );
  }
  return defaults;
}

/** `input`: an execution's input bounds, within what the supervisor itself can hold and encode. */
function parseInput(issues: string[], v: unknown, d: InputLimits): InputLimits {
  if (!isObject(v)) {
    issues.push('input must be an object { maxBytes, maxDepth }');
    return { ...d };
  }
  unknown(issues, 'input', v, INPUT_KEYS);
  const input = { ...d, ...(v as Partial<InputLimits>) };
  if (!positiveNumber(input.maxBytes, true) || input.maxBytes > MAX_INPUT_BYTES)
    issues.push(
      `input.maxBytes must be a positive integer up to ${MAX_INPUT_BYTES} (got ${JSON.stringify(input.maxBytes)})`,
    );
  if (!positiveNumber(input.maxDepth, true) || input.maxDepth > MAX_INPUT_DEPTH)
    issues.push(
      `input.maxDepth must be a positive integer up to ${MAX_INPUT_DEPTH} (got ${JSON.stringify(input.maxDepth)})`,
    );
  return input;
}

/** `executions`: how many run at once on one supervisor and how many wait, within the CLI's own bounds. */
function parseExecutions(issues: string[], v: unknown, d: ExecutionConcurrency): ExecutionConcurrency {
  if (!isObject(v)) {
    issues.push('executions must be an object { maxRunning, maxQueued }');
    return { ...d };
  }
  unknown(issues, 'executions', v, EXECUTIONS_KEYS);
  const executions = { ...d, ...(v as Partial<ExecutionConcurrency>) };
  const { maxRunning, maxQueued } = executions;
  if (!(Number.isSafeInteger(maxRunning) && maxRunning >= 1 && maxRunning <= MAX_RUNNING))
    issues.push(
      `executions.maxRunning must be an integer from 1 to ${MAX_RUNNING} (got ${JSON.stringify(maxRunning)})`,
    );
  if (!(Number.isSafeInteger(maxQueued) && maxQueued >= 0 && maxQueued <= MAX_QUEUED))
    issues.push(`executions.maxQueued must be an integer from 0 to ${MAX_QUEUED} (got ${JSON.stringify(maxQueued)})`);
  return executions;
}

/** `jobs`: which job records are taken from the network, the per-repo rate and the intake queue's bound. */
function parseJobs(issues: string[], v: unknown, d: JobIntakePolicy): JobIntakePolicy {
  if (!isObject(v)) {
    issues.push('jobs must be an object { acceptUnaddressed, perRepoPerMinute, maxQueued }');
    return { ...d };
  }
  unknown(issues, 'jobs', v, JOBS_KEYS);
  const jobs = { ...d, ...(v as Partial<JobIntakePolicy>) };
  const { acceptUnaddressed, perRepoPerMinute, maxQueued } = jobs;
  if (typeof acceptUnaddressed !== 'boolean')
    issues.push(`jobs.acceptUnaddressed must be true or false (got ${JSON.stringify(acceptUnaddressed)})`);
  if (!(Number.isSafeInteger(perRepoPerMinute) && perRepoPerMinute >= 1 && perRepoPerMinute <= MAX_JOBS_PER_MINUTE))
    issues.push(
      `jobs.perRepoPerMinute must be an integer from 1 to ${MAX_JOBS_PER_MINUTE} (got ${JSON.stringify(perRepoPerMinute)})`,
    );
  if (!(Number.isSafeInteger(maxQueued) && maxQueued >= 1 && maxQueued <= MAX_JOBS_QUEUED))
    issues.push(`jobs.maxQueued must be an integer from 1 to ${MAX_JOBS_QUEUED} (got ${JSON.stringify(maxQueued)})`);
  return jobs;
}

/**
 * Parses and validates an operator policy (JSON text or an already-parsed value). Omitted fields take
 * DEFAULT_OPERATOR_POLICY's values. Throws ValidationError `OPERATOR_POLICY_INVALID` listing every issue.
 */
export function parseOperatorPolicy(json: unknown): OperatorPolicy {
  let value = json;
  if (typeof json === 'string') {
    try {
      value = JSON.parse(json) as unknown;
    } catch (err) {
      throw new ValidationError(
        'OPERATOR_POLICY_INVALID',
        `operator policy is not valid JSON: ${(err as Error).message}`,
        ['not valid JSON'],
      );
    }
  }
  if (!isObject(value))
    throw new ValidationError('OPERATOR_POLICY_INVALID', 'operator policy must be a JSON object', ['not an object']);
  const issues: string[] = [];
  unknown(issues, '', value, TOP_KEYS);
  const d = DEFAULT_OPERATOR_POLICY;

  const protocolVersions =
    value.protocolVersions === undefined
      ? [...d.protocolVersions]
      : parseProtocolVersions(issues, value.protocolVersions, d.protocolVersions);
  const platforms =
    value.platforms === undefined
      ? d.platforms.map((p) => ({ ...p }))
      : parsePlatforms(issues, value.platforms, d.platforms);

  const publishers =
    value.publishers === undefined
      ? [...d.publishers]
      : stringList(issues, 'publishers', value.publishers, isDid, 'a DID');
  const registries =
    value.registries === undefined
      ? [...d.registries]
      : stringList(issues, 'registries', value.registries, (s) => REGISTRY_RE.test(s), 'a registry host[:port]');

  const archive = value.archive === undefined ? { ...d.archive } : parseArchive(issues, value.archive, d.archive);
  const ceilings = value.ceilings === undefined ? { ...d.ceilings } : parseCeilings(issues, value.ceilings, d.ceilings);
  const defaults = value.defaults === undefined ? { ...d.defaults } : parseDefaults(issues, value.defaults, d.defaults);
  // A default above its ceiling would be refused (reject mode) or silently lowered (clamp) for every
  // execution that requests nothing: make the operator write what they mean instead.
  for (const k of DEFAULT_KEYS) {
    if (typeof defaults[k] === 'number' && typeof ceilings[k] === 'number' && defaults[k] > ceilings[k]) {
      issues.push(`defaults.${k} (${defaults[k]}) is above ceilings.${k} (${ceilings[k]})`);
    }
  }
  const input = value.input === undefined ? { ...d.input } : parseInput(issues, value.input, d.input);
  if (typeof ceilings.frameDepth === 'number' && ceilings.frameDepth > MAX_INPUT_DEPTH)
    issues.push(`ceilings.frameDepth must be at most ${MAX_INPUT_DEPTH}`);
  if (typeof ceilings.memoryMb === 'number' && ceilings.memoryMb < 6)
    issues.push('ceilings.memoryMb must be at least 6 (the Docker minimum)');

  const limitMode = value.limitMode ?? d.limitMode;
  if (limitMode !== 'clamp' && limitMode !== 'reject')
    issues.push(`limitMode must be "clamp" or "reject" (got ${JSON.stringify(limitMode)})`);
  const isolation = value.isolation ?? d.isolation;
  if (isolation !== 'runc' && isolation !== 'runsc')
    issues.push(`isolation must be "runc" or "runsc" (got ${JSON.stringify(isolation)})`);

  const prestart =
    value.prestart === undefined
      ? { ...d.prestart, publishers: [...d.prestart.publishers] }
      : parsePrestart(issues, value.prestart, d.prestart);
  const executions =
    value.executions === undefined ? { ...d.executions } : parseExecutions(issues, value.executions, d.executions);
  const jobs = value.jobs === undefined ? { ...d.jobs } : parseJobs(issues, value.jobs, d.jobs);
  const network = parseNetworkPolicy(issues, value.network === undefined ? d.network : value.network, d.network);

  if (issues.length > 0 || !publishers || !registries) {
    throw new ValidationError(
      'OPERATOR_POLICY_INVALID',
      `invalid operator policy${issues.length === 1 ? `: ${issues[0]}` : ''}`,
      issues,
    );
  }
  return deepFreeze({
    protocolVersions,
    platforms,
    publishers,
    registries,
    archive,
    ceilings,
    defaults,
    input,
    limitMode: limitMode as LimitMode,
    isolation: isolation as Isolation,
    prestart,
    executions,
    jobs,
    network,
  });
}
