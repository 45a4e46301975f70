// Records the runner publishes in its own repo:
//   dev.mainasara.at-run.beta.v2.runner     — the advertised policy (rkey "self" by default)
//   dev.mainasara.at-run.beta.v2.execution  — one receipt per execution (rkey = execution id, so a retry
//                                             after a crash rewrites the same record instead of adding one)
// Inputs are validated here, listing every problem (RECORD_FIELDS_INVALID), before anything is written.

import { AT_RUN_V2, type StrongRef } from './collections.ts';
import { parseCid, type JsonObject } from './cid.ts';
import { atprotoValidationError } from './errors.ts';
import type { BlobRef, Publisher } from './publisher.ts';
import { isValidDid, isValidRecordKey, parseRecordUri } from './syntax.ts';
import { SEALED_RESULT_MIME_TYPE } from '../../domain/at-run/sealed-result.ts';
import { isX25519DidKey } from '../../domain/at-run/x25519-keys.ts';

export type ExecutionOutcome = 'succeeded' | 'failed';
export type ExecutionFailureKind =
  'resolution' | 'validation' | 'materialization' | 'runtime' | 'timeout' | 'cancelled' | 'lost';

export interface ExecutionLimits {
  memoryBytes: number;
  pids: number;
  /** CPU quota in thousandths of a CPU (1000 = one CPU). */
  milliCpus?: number;
  timeoutMs: number;
  /** Network access granted to the sandbox: none, or through the runner's egress proxy. */
  network: 'none' | 'proxy';
}

/** With network "proxy": what was granted (destinations) and a summary of what the execution used. */
export interface ExecutionEgress {
  granted: { host: string; ports: number[] }[];
  connections: number;
  refused: number;
  bytesUp: number;
  bytesDown: number;
  /** The limit that cut the execution's network, when one did (an EGRESS_* code). */
  stopped?: string;
}

export interface ExecutionReceipt {
  /** exec_<ULID>; also the record key. */
  executionId: string;
  code: StrongRef;
  runtime: StrongRef;
  /** The code blob's CID (raw, sha256). */
  codeBlobCid: string;
  /** The alias the caller named, when the execution started from one. */
  alias?: StrongRef;
  handler: string;
  images: {
    /** repository@sha256:<digest> of the runtime artifact. */
    runtime: string;
    /** repository@sha256:<digest> of the runner-owned sandbox image. */
    sandbox: string;
    additions?: string[];
  };
  limits: ExecutionLimits;
  /** Present exactly when limits.network is "proxy". */
  egress?: ExecutionEgress;
  /** sha256 (hex) of the exact input JSON bytes sent in the invocation envelope. */
  inputSha256: string;
  /** sha256 (hex) of the exact result JSON bytes received; absent when there was no result. */
  outputSha256?: string;
  /**
   * Those result bytes as a blob in the runner's repo, for a job's caller to read: application/json, or, when the
   * job named a resultKey, sealed to it (SEALED_RESULT_MIME_TYPE, an envelope: outputSha256 then hashes the envelope, not its plaintext).
   */
  result?: BlobRef;
  outcome: ExecutionOutcome;
  failure?: { kind: ExecutionFailureKind; code?: string; message?: string };
  exitCode?: number;
  callerDid?: string;
  /** The job record (dev.mainasara.at-run.beta.v2.job) this execution answers, when it came from the network. */
  job?: StrongRef;
  /** The runner record (policy) in force for this execution. */
  runner?: StrongRef;
  startedAt: string;
  finishedAt: string;
}

/**
 * The network a runner offers, as its record advertises it. The operator's allowRanges are not advertised: they
 * name addresses inside the operator's own networks, which a public record has no business describing.
 */
export interface RunnerEgress {
  /** Host names or `*.suffix` patterns, each with the ports executions may reach it on. */
  destinations: { host: string; ports: number[] }[];
  limits: { maxBytes: number; maxSeconds: number; maxConnections: number };
}

export interface RunnerPolicy {
  /** Worker protocol versions accepted (at-run V2: [1]). */
  protocolVersions: number[];
  /** Runtime kinds accepted (at-run V2: ["language"]). */
  runtimeKinds: string[];
  /** OCI platforms this runner's Docker daemon reports. */
  platforms: { os: string; architecture: string; variant?: string }[];
  isolation: {
    /** "docker" today; "proot", "vm"… later. */
    backend: string;
    /** OCI runtime used for the sandbox (e.g. "runc", "runsc"). */
    ociRuntime: string;
    /** Whether the runner requires a sandboxed runtime or disposable VM for every execution. */
    strong: boolean;
  };
  /** repository@sha256:<digest> of the fixed, runner-owned sandbox image. */
  sandboxImage: string;
  limits: {
    maxMemoryBytes: number;
    maxPids: number;
    maxMilliCpus: number;
    maxTimeoutMs: number;
    maxCodeBlobBytes: number;
    maxRuntimeArchiveBytes: number;
    /** "proxy": executions that ask for network reach `egress`'s destinations through the runner's egress proxy. */
    network: 'none' | 'proxy';
  };
  /** With network "proxy": where executions may connect, and each one's network limits. */
  egress?: RunnerEgress;
  /** Runtime publisher DIDs accepted; absent means any. */
  publishers?: string[];
  /** OCI registries (host[:port]) images may be pulled from; absent means any. */
  registries?: string[];
  /** The runner's current X25519 public key (did:key) secrets are sealed to; absent: it takes no secrets. */
  encryptionKey?: string;
  /** The keys it still opens secrets with: the current one, and older ones until their retire date. */
  encryptionKeys?: { publicKey: string; retiresAt?: string }[];
  description?: string;
}

const DIGEST_REF_RE = /^[a-z0-9][a-z0-9._:/-]*@sha256:[a-f0-9]{64}$/;
const SHA256_HEX_RE = /^[a-f0-9]{64}$/;
const DATETIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const FAILURE_KINDS: readonly string[] = [
  'resolution',
  'validation',
  'materialization',
  'runtime',
  'timeout',
  'cancelled',
  'lost',
];

class Issues {
  readonly list: string[] = [];
  add(path: string, msg: string) {
    this.list.push(`${path}: ${msg}`);
  }
  int(path: string, v: unknown, min = 0) {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) this.add(path, `must be an integer ≥ ${min}`);
  }
  str(path: string, v: unknown, max = 3000) {
    if (typeof v !== 'string' || v.length === 0 || v.length > max)
      this.add(path, `must be a non-empty string of at most ${max} characters`);
  }
  datetime(path: string, v: unknown) {
    if (typeof v !== 'string' || !DATETIME_RE.test(v) || Number.isNaN(Date.parse(v)))
      this.add(path, 'must be an RFC 3339 datetime');
  }
  digestRef(path: string, v: unknown) {
    if (typeof v !== 'string' || !DIGEST_REF_RE.test(v))
      this.add(path, 'must be a repository@sha256:<64 hex> reference');
  }
  sha256(path: string, v: unknown) {
    if (typeof v !== 'string' || !SHA256_HEX_RE.test(v)) this.add(path, 'must be 64 lowercase hex characters (sha256)');
  }
  did(path: string, v: unknown) {
    if (typeof v !== 'string' || !isValidDid(v)) this.add(path, 'must be a DID');
  }
  cid(path: string, v: unknown, codec?: number) {
    try {
      if (typeof v !== 'string') throw new Error();
      const c = parseCid(v);
      if (codec !== undefined && (c.version !== 1 || c.code !== codec))
        this.add(path, `must be a CIDv1 with codec 0x${codec.toString(16)}`);
    } catch {
      this.add(path, 'must be a CID');
    }
  }
  strongRef(path: string, v: unknown, collection?: string) {
    if (typeof v !== 'object' || v === null) return this.add(path, 'must be a strong ref {uri, cid}');
    const r = v as Record<string, unknown>;
    try {
      if (typeof r.uri !== 'string') throw new Error('must be a string');
      const p = parseRecordUri(r.uri);
      if (!p.did) this.add(`${path}.uri`, 'must name the repo by DID');
      if (collection && p.collection !== collection) this.add(`${path}.uri`, `must be a ${collection} record`);
    } catch (err) {
      this.add(`${path}.uri`, (err as Error).message);
    }
    this.cid(`${path}.cid`, r.cid, 0x71);
  }
  /** A blob ref to a result: a raw CID, application/json (in clear) or the sealed envelope's type, its size. */
  resultBlob(path: string, v: unknown) {
    if (typeof v !== 'object' || v === null) return this.add(path, 'must be a blob ref');
    const b = v as Partial<BlobRef>;
    if (b.$type !== 'blob') this.add(`${path}.$type`, 'must be "blob"');
    this.cid(`${path}.ref.$link`, b.ref?.$link, 0x55);
    if (b.mimeType !== 'application/json' && b.mimeType !== SEALED_RESULT_MIME_TYPE)
      this.add(`${path}.mimeType`, `must be "application/json" or "${SEALED_RESULT_MIME_TYPE}"`);
    this.int(`${path}.size`, b.size);
  }
  throwIfAny(what: string) {
    if (this.list.length > 0) throw atprotoValidationError('RECORD_FIELDS_INVALID', `invalid ${what}`, this.list);
  }
}

const ref = (r: StrongRef): JsonObject => ({ uri: r.uri, cid: r.cid });

/** Validates a receipt and returns the execution record (atproto JSON, $type set). */
export function buildExecutionRecord(r: ExecutionReceipt): JsonObject {
  const v = new Issues();
  if (typeof r.executionId !== 'string' || !isValidRecordKey(r.executionId))
    v.add('executionId', 'must be a valid record key (exec_<ULID>)');
  v.strongRef('code', r.code, AT_RUN_V2.code);
  v.strongRef('runtime', r.runtime, AT_RUN_V2.runtime);
  v.cid('codeBlobCid', r.codeBlobCid, 0x55);
  if (r.alias !== undefined) v.strongRef('alias', r.alias, AT_RUN_V2.alias);
  v.str('handler', r.handler, 256);
  if (typeof r.images !== 'object' || r.images === null) v.add('images', 'must be an object');
  else {
    v.digestRef('images.runtime', r.images.runtime);
    v.digestRef('images.sandbox', r.images.sandbox);
    (r.images.additions ?? []).forEach((a, i) => v.digestRef(`images.additions[${i}]`, a));
  }
  if (typeof r.limits !== 'object' || r.limits === null) v.add('limits', 'must be an object');
  else {
    v.int('limits.memoryBytes', r.limits.memoryBytes, 1);
    v.int('limits.pids', r.limits.pids, 1);
    if (r.limits.milliCpus !== undefined) v.int('limits.milliCpus', r.limits.milliCpus, 1);
    v.int('limits.timeoutMs', r.limits.timeoutMs, 1);
    if (r.limits.network !== 'none' && r.limits.network !== 'proxy')
      v.add('limits.network', 'must be "none" or "proxy"');
    if ((r.limits.network === 'proxy') !== (r.egress !== undefined))
      v.add('egress', 'is there exactly when limits.network is "proxy"');
  }
  if (r.egress !== undefined) {
    for (const k of ['connections', 'refused', 'bytesUp', 'bytesDown'] as const) v.int(`egress.${k}`, r.egress[k], 0);
    if (!Array.isArray(r.egress.granted) || r.egress.granted.length === 0)
      v.add('egress.granted', 'must list the destinations granted');
    if (r.egress.stopped !== undefined) v.str('egress.stopped', r.egress.stopped, 128);
  }
  v.sha256('inputSha256', r.inputSha256);
  if (r.outputSha256 !== undefined) v.sha256('outputSha256', r.outputSha256);
  if (r.result !== undefined) {
    v.resultBlob('result', r.result);
    if (r.outputSha256 === undefined) v.add('result', 'needs outputSha256 (the hash of its bytes)');
    if (r.outcome !== 'succeeded') v.add('result', 'must be absent when outcome is not "succeeded"');
  }
  if (r.outcome !== 'succeeded' && r.outcome !== 'failed') v.add('outcome', 'must be "succeeded" or "failed"');
  if (r.outcome === 'failed' && !r.failure) v.add('failure', 'is required when outcome is "failed"');
  if (r.outcome === 'succeeded' && r.failure) v.add('failure', 'must be absent when outcome is "succeeded"');
  if (r.failure) {
    if (!FAILURE_KINDS.includes(r.failure.kind)) v.add('failure.kind', `must be one of ${FAILURE_KINDS.join(', ')}`);
    if (r.failure.code !== undefined) v.str('failure.code', r.failure.code, 128);
    if (r.failure.message !== undefined) v.str('failure.message', r.failure.message, 3000);
  }
  if (r.exitCode !== undefined && (!Number.isSafeInteger(r.exitCode) || r.exitCode < -1 || r.exitCode > 255))
    v.add('exitCode', 'must be an integer in [-1, 255]');
  if (r.callerDid !== undefined) v.did('callerDid', r.callerDid);
  if (r.job !== undefined) v.strongRef('job', r.job, AT_RUN_V2.job);
  if (r.runner !== undefined) v.strongRef('runner', r.runner, AT_RUN_V2.runner);
  v.datetime('startedAt', r.startedAt);
  v.datetime('finishedAt', r.finishedAt);
  if (Date.parse(r.finishedAt) < Date.parse(r.startedAt)) v.add('finishedAt', 'is before startedAt');
  v.throwIfAny('execution receipt');

  return {
    $type: AT_RUN_V2.execution,
    executionId: r.executionId,
    code: ref(r.code),
    runtime: ref(r.runtime),
    codeBlobCid: r.codeBlobCid,
    ...(r.alias ? { alias: ref(r.alias) } : {}),
    handler: r.handler,
    images: { runtime: r.images.runtime, sandbox: r.images.sandbox, additions: [...(r.images.additions ?? [])] },
    limits: {
      memoryBytes: r.limits.memoryBytes,
      pids: r.limits.pids,
      ...(r.limits.milliCpus !== undefined ? { milliCpus: r.limits.milliCpus } : {}),
      timeoutMs: r.limits.timeoutMs,
      network: r.limits.network,
    },
    ...(r.egress
      ? {
          egress: {
            granted: r.egress.granted.map((d) => ({ host: d.host, ports: [...d.ports] })),
            connections: r.egress.connections,
            refused: r.egress.refused,
            bytesUp: r.egress.bytesUp,
            bytesDown: r.egress.bytesDown,
            ...(r.egress.stopped !== undefined ? { stopped: r.egress.stopped } : {}),
          },
        }
      : {}),
    inputSha256: r.inputSha256,
    ...(r.outputSha256 !== undefined ? { outputSha256: r.outputSha256 } : {}),
    ...(r.result
      ? {
          result: {
            $type: 'blob',
            ref: { $link: r.result.ref.$link },
            mimeType: r.result.mimeType,
            size: r.result.size,
          },
        }
      : {}),
    outcome: r.outcome,
    ...(r.failure
      ? {
          failure: {
            kind: r.failure.kind,
            ...(r.failure.code ? { code: r.failure.code } : {}),
            ...(r.failure.message ? { message: r.failure.message } : {}),
          },
        }
      : {}),
    ...(r.exitCode !== undefined ? { exitCode: r.exitCode } : {}),
    ...(r.callerDid ? { callerDid: r.callerDid } : {}),
    ...(r.job ? { job: ref(r.job) } : {}),
    ...(r.runner ? { runner: ref(r.runner) } : {}),
    startedAt: r.startedAt,
    finishedAt: r.finishedAt,
  };
}

/** The advertised keys are X25519 did:keys; the listed ones include the current one, which has no retire date. */
function encryptionKeyIssues(v: Issues, p: RunnerPolicy): void {
  if (p.encryptionKey !== undefined && !isX25519DidKey(p.encryptionKey))
    v.add('encryptionKey', 'must be an X25519 public key as a did:key');
  if (p.encryptionKeys === undefined) return;
  if (p.encryptionKey === undefined) v.add('encryptionKeys', 'needs encryptionKey (the current key) too');
  if (p.encryptionKeys.length > 16) v.add('encryptionKeys', 'must list at most 16 keys');
  p.encryptionKeys.forEach((k, i) => {
    if (!isX25519DidKey(k?.publicKey)) v.add(`encryptionKeys[${i}].publicKey`, 'must be an X25519 did:key');
    if (k?.retiresAt !== undefined) v.datetime(`encryptionKeys[${i}].retiresAt`, k.retiresAt);
  });
  const current = p.encryptionKeys.find((k) => k?.publicKey === p.encryptionKey);
  if (p.encryptionKey !== undefined && (!current || current.retiresAt !== undefined))
    v.add('encryptionKeys', 'must list encryptionKey without a retire date');
}

/** `egress` is there exactly when the network is "proxy", with at least one destination and every limit. */
function egressIssues(v: Issues, p: RunnerPolicy): void {
  const proxy = p.limits?.network === 'proxy';
  if (p.egress === undefined) {
    if (proxy) v.add('egress', 'is required when limits.network is "proxy"');
    return;
  }
  if (!proxy) v.add('egress', 'must be absent unless limits.network is "proxy"');
  const { destinations, limits } = p.egress;
  if (!Array.isArray(destinations) || destinations.length === 0 || destinations.length > 256)
    v.add('egress.destinations', 'must list 1 to 256 destinations');
  else
    destinations.forEach((d, i) => {
      v.str(`egress.destinations[${i}].host`, d?.host, 255);
      if (!Array.isArray(d?.ports) || d.ports.length === 0) v.add(`egress.destinations[${i}].ports`, 'must list ports');
      else
        d.ports.forEach((port, j) => {
          if (!Number.isSafeInteger(port) || port < 1 || port > 65535)
            v.add(`egress.destinations[${i}].ports[${j}]`, 'must be a port from 1 to 65535');
        });
    });
  for (const k of ['maxBytes', 'maxSeconds', 'maxConnections'] as const) v.int(`egress.limits.${k}`, limits?.[k], 1);
}

/** Validates a runner policy and returns the runner record (atproto JSON, $type set). */
export function buildRunnerRecord(p: RunnerPolicy, opts: { createdAt?: string } = {}): JsonObject {
  const v = new Issues();
  if (!Array.isArray(p.protocolVersions) || p.protocolVersions.length === 0)
    v.add('protocolVersions', 'must list at least one version');
  else p.protocolVersions.forEach((x, i) => v.int(`protocolVersions[${i}]`, x, 1));
  if (!Array.isArray(p.runtimeKinds) || p.runtimeKinds.length === 0)
    v.add('runtimeKinds', 'must list at least one kind');
  else p.runtimeKinds.forEach((x, i) => v.str(`runtimeKinds[${i}]`, x, 64));
  if (!Array.isArray(p.platforms) || p.platforms.length === 0) v.add('platforms', 'must list at least one platform');
  else
    p.platforms.forEach((x, i) => {
      v.str(`platforms[${i}].os`, x?.os, 64);
      v.str(`platforms[${i}].architecture`, x?.architecture, 64);
      if (x?.variant !== undefined) v.str(`platforms[${i}].variant`, x.variant, 64);
    });
  if (typeof p.isolation !== 'object' || p.isolation === null) v.add('isolation', 'must be an object');
  else {
    v.str('isolation.backend', p.isolation.backend, 64);
    v.str('isolation.ociRuntime', p.isolation.ociRuntime, 64);
    if (typeof p.isolation.strong !== 'boolean') v.add('isolation.strong', 'must be a boolean');
  }
  v.digestRef('sandboxImage', p.sandboxImage);
  if (typeof p.limits !== 'object' || p.limits === null) v.add('limits', 'must be an object');
  else {
    for (const k of [
      'maxMemoryBytes',
      'maxPids',
      'maxMilliCpus',
      'maxTimeoutMs',
      'maxCodeBlobBytes',
      'maxRuntimeArchiveBytes',
    ] as const)
      v.int(`limits.${k}`, p.limits[k], 1);
    if (p.limits.network !== 'none' && p.limits.network !== 'proxy')
      v.add('limits.network', 'must be "none" or "proxy"');
  }
  egressIssues(v, p);
  (p.publishers ?? []).forEach((d, i) => v.did(`publishers[${i}]`, d));
  (p.registries ?? []).forEach((r, i) => v.str(`registries[${i}]`, r, 253));
  encryptionKeyIssues(v, p);
  if (p.description !== undefined) v.str('description', p.description, 3000);
  const createdAt = opts.createdAt ?? new Date().toISOString();
  v.datetime('createdAt', createdAt);
  v.throwIfAny('runner policy');

  return {
    $type: AT_RUN_V2.runner,
    protocolVersions: [...p.protocolVersions],
    runtimeKinds: [...p.runtimeKinds],
    platforms: p.platforms.map((x) => ({
      os: x.os,
      architecture: x.architecture,
      ...(x.variant !== undefined ? { variant: x.variant } : {}),
    })),
    isolation: { backend: p.isolation.backend, ociRuntime: p.isolation.ociRuntime, strong: p.isolation.strong },
    sandboxImage: p.sandboxImage,
    limits: {
      maxMemoryBytes: p.limits.maxMemoryBytes,
      maxPids: p.limits.maxPids,
      maxMilliCpus: p.limits.maxMilliCpus,
      maxTimeoutMs: p.limits.maxTimeoutMs,
      maxCodeBlobBytes: p.limits.maxCodeBlobBytes,
      maxRuntimeArchiveBytes: p.limits.maxRuntimeArchiveBytes,
      network: p.limits.network,
    },
    ...(p.egress
      ? {
          egress: {
            destinations: p.egress.destinations.map((d) => ({ host: d.host, ports: [...d.ports] })),
            limits: { ...p.egress.limits },
          },
        }
      : {}),
    ...(p.publishers ? { publishers: [...p.publishers] } : {}),
    ...(p.registries ? { registries: [...p.registries] } : {}),
    ...(p.encryptionKey !== undefined ? { encryptionKey: p.encryptionKey } : {}),
    ...(p.encryptionKeys
      ? {
          encryptionKeys: p.encryptionKeys.map((k) => ({
            publicKey: k.publicKey,
            ...(k.retiresAt !== undefined ? { retiresAt: k.retiresAt } : {}),
          })),
        }
      : {}),
    ...(p.description !== undefined ? { description: p.description } : {}),
    createdAt,
  };
}

/** Writes (or rewrites) the receipt at <runner repo>/dev.mainasara.at-run.beta.v2.execution/<executionId>. */
export async function writeExecutionReceipt(publisher: Publisher, receipt: ExecutionReceipt): Promise<StrongRef> {
  return publisher.putRecord(AT_RUN_V2.execution, receipt.executionId, buildExecutionRecord(receipt));
}

/**
 * The receipt of a job whose execution failed before it ran (refused at intake, or failed to resolve, materialize
 * or start): the job, why, and who asked.
 */
export interface NotRunReceipt {
  /** The execution the refusal is recorded as (its id is the job's: jobExecutionId); also the record key. */
  executionId: string;
  job: StrongRef;
  /** Why (the error table's code, a message for the caller), and at which step (default: validation, a refusal). */
  failure: { code: string; message: string; kind?: ExecutionFailureKind };
  /** The job's author, when its record could be read. */
  callerDid?: string;
  runner?: StrongRef;
  startedAt: string;
  finishedAt: string;
}

/**
 * Validates the receipt of a job that failed before it ran (refused at intake, or failed to resolve, materialize or
 * start) and returns its execution record: outcome "failed", and none of the fields of an execution that ran
 * (code, runtime, images, limits, input), since none of them was used.
 */
export function buildNotRunRecord(r: NotRunReceipt): JsonObject {
  const v = new Issues();
  if (typeof r.executionId !== 'string' || !isValidRecordKey(r.executionId))
    v.add('executionId', 'must be a valid record key');
  v.strongRef('job', r.job, AT_RUN_V2.job);
  if (r.failure?.kind !== undefined && !FAILURE_KINDS.includes(r.failure.kind))
    v.add('failure.kind', `must be one of ${FAILURE_KINDS.join(', ')}`);
  v.str('failure.code', r.failure?.code, 128);
  v.str('failure.message', r.failure?.message, 3000);
  if (r.callerDid !== undefined) v.did('callerDid', r.callerDid);
  if (r.runner !== undefined) v.strongRef('runner', r.runner, AT_RUN_V2.runner);
  v.datetime('startedAt', r.startedAt);
  v.datetime('finishedAt', r.finishedAt);
  v.throwIfAny('refusal receipt');
  return {
    $type: AT_RUN_V2.execution,
    executionId: r.executionId,
    job: ref(r.job),
    outcome: 'failed',
    failure: { kind: r.failure.kind ?? 'validation', code: r.failure.code, message: r.failure.message },
    ...(r.callerDid ? { callerDid: r.callerDid } : {}),
    ...(r.runner ? { runner: ref(r.runner) } : {}),
    startedAt: r.startedAt,
    finishedAt: r.finishedAt,
  };
}

/** Writes (or rewrites) a not-run receipt at <runner repo>/dev.mainasara.at-run.beta.v2.execution/<executionId>. */
export async function writeNotRunReceipt(publisher: Publisher, receipt: NotRunReceipt): Promise<StrongRef> {
  return publisher.putRecord(AT_RUN_V2.execution, receipt.executionId, buildNotRunRecord(receipt));
}

/** Writes the runner record (default rkey "self"). */
export async function putRunnerRecord(
  publisher: Publisher,
  policy: RunnerPolicy,
  opts: { rkey?: string; createdAt?: string } = {},
): Promise<StrongRef> {
  return publisher.putRecord(
    AT_RUN_V2.runner,
    opts.rkey ?? 'self',
    buildRunnerRecord(policy, opts.createdAt !== undefined ? { createdAt: opts.createdAt } : {}),
  );
}
