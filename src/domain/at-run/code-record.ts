// The V2 code record (`dev.mainasara.at-run.beta.v2.code`) and its validation. Lexicon:
// lexicons/dev.mainasara.at-run.beta.v2.code.json (same fields).
//
//   $type          'dev.mainasara.at-run.beta.v2.code'
//   runtime        canonical runtime name, for discovery and display only (never execution authority)
//   runtimeRecord  strong ref { uri, cid } to the exact public runtime record
//                  (uri: at://<publisher DID>/dev.mainasara.at-run.beta.v2.runtime/<rkey>, cid: dag-cbor CIDv1)
//   blob           the code artifact: { $type: 'blob', ref: { $link: <raw CIDv1> }, mimeType, size }
//                  mimeType must be exactly `application/<runtimeRecord.cid>` (the runtime binding)
//   entrypoint     safe relative path inside the archive's single top-level directory
//   additions?     digest-pinned OCI images (`repository@sha256:<64 hex>`) whose fixed /at-run/addition
//                  directory is mounted read-only at /opt/at-run/additions/<index>
//   requested?     { network?, hosts?, memoryMb?, cpus?, pids?, timeoutMs? }: what the author asks for; the
//                  operator policy decides (see policy-admission.ts effectiveLimits). All numbers are integers
//                  because the atproto data model has no floats: `cpus` counts whole CPUs. `hosts` (only with
//                  `network: true`) names the hosts the code needs, `api.example.com` or `*.example.com`, each
//                  optionally with `:port`: the grant is what both they and the policy's destinations cover
//   handlers?      the exported handler names, when the author lists them: an execution of any other handler
//                  is refused (HANDLER_NOT_FOUND) before anything is pulled, extracted or started
//   description?   free text for humans
//   createdAt      RFC 3339 datetime
//
// Cross-field equality (mimeType vs runtimeRecord.cid) cannot be expressed in Lexicon; it is enforced here.
// Records are closed: unknown fields are refused. Every violation is collected.

import { hostPatternIssue, splitHostPort } from './egress-host.ts';
import { canonicalRelativePath } from './safe-path.ts';
import { digestReferenceIssues } from './oci-reference.ts';
import { DAG_CBOR_CODEC, RAW_CODEC, blobRefLink, cidIssues, isDatetime, parseRecordUriOf } from './record-syntax.ts';
import {
  RecordValidationError,
  ViolationList,
  isPlainObject,
  join,
  unknownKeys,
  type RecordViolation,
} from './record-violations.ts';
import { RUNTIME_NAME_RE, RUNTIME_RECORD_NSID } from './runtime-record.ts';

export const CODE_RECORD_NSID = 'dev.mainasara.at-run.beta.v2.code';

export const CODE_LIMITS = Object.freeze({
  additions: 8,
  handlers: 256,
  descriptionLength: 3000,
  nameLength: 64,
  /** Upper bounds on what a record may even ask for; the operator policy's ceilings are usually lower. */
  /** Hosts a record may name in requested.hosts. */
  hosts: 32,
  memoryMb: 1024 * 1024,
  cpus: 1024,
  pids: 1_000_000,
  timeoutMs: 7 * 24 * 3600 * 1000,
});

/** A blob reference in its JSON (lex-json) form. */
export interface BlobRef {
  $type: 'blob';
  ref: { $link: string };
  mimeType: string;
  size: number;
}

export interface StrongRef {
  uri: string;
  cid: string;
}

export interface RequestedLimits {
  network?: boolean;
  /** The hosts (or `*.suffix` patterns), each optionally `:port`, the code connects to; needs `network: true`. */
  hosts?: string[];
  memoryMb?: number;
  cpus?: number;
  pids?: number;
  timeoutMs?: number;
}

export interface CodeRecord {
  $type: typeof CODE_RECORD_NSID;
  runtime: string;
  runtimeRecord: StrongRef;
  blob: BlobRef;
  entrypoint: string;
  additions?: string[];
  requested?: RequestedLimits;
  handlers?: string[];
  description?: string;
  createdAt: string;
}

export type CodeRecordCode =
  | 'CODE_RECORD_INVALID' // not an object, wrong $type, missing/mistyped/unknown fields, bad runtime name or createdAt
  | 'CODE_RUNTIME_REF_INVALID' // runtimeRecord is not a strong ref to a V2 runtime record
  | 'CODE_BLOB_INVALID' // blob is not a blob ref to a raw sha256 CIDv1 with a positive size
  | 'CODE_MIME_MISMATCH' // blob.mimeType != application/<runtimeRecord.cid>
  | 'CODE_ENTRYPOINT_INVALID'
  | 'CODE_ADDITION_NOT_DIGEST'
  | 'CODE_REQUESTED_INVALID'
  | 'CODE_HANDLERS_INVALID' // handlers is not a list of distinct identifiers
  | 'RUNTIME_BINDING_MISMATCH'; // the fetched runtime record is not the one the code record names

const REQUESTED_INTEGERS = [
  ['memoryMb', 6, CODE_LIMITS.memoryMb], // Docker refuses less than 6 MB
  ['cpus', 1, CODE_LIMITS.cpus],
  ['pids', 1, CODE_LIMITS.pids],
  ['timeoutMs', 1, CODE_LIMITS.timeoutMs],
] as const;

/** `requested.hosts`: distinct `host[:port]` entries (a host or `*.suffix` pattern, lower case), with network. */
function checkHosts(list: ViolationList, hosts: unknown, network: boolean): void {
  if (hosts === undefined) return;
  if (!network) list.add('CODE_REQUESTED_INVALID', 'requested.hosts', 'hosts needs network: true');
  if (!Array.isArray(hosts) || hosts.length === 0 || hosts.length > CODE_LIMITS.hosts) {
    list.add(
      'CODE_REQUESTED_INVALID',
      'requested.hosts',
      `hosts must be a non-empty array of at most ${CODE_LIMITS.hosts} host[:port] entries`,
    );
    return;
  }
  hosts.forEach((h, i) => {
    const parts = typeof h === 'string' ? splitHostPort(h) : null;
    const issue = parts ? hostPatternIssue(parts.host) : 'must be host or host:port with a port from 1 to 65535';
    if (issue) list.add('CODE_REQUESTED_INVALID', join('requested.hosts', i), `${JSON.stringify(h)} ${issue}`);
    else if (hosts.indexOf(h) !== i)
      list.add('CODE_REQUESTED_INVALID', join('requested.hosts', i), `${JSON.stringify(h)} is listed twice`);
  });
}

function checkRequested(list: ViolationList, requested: unknown): void {
  if (requested === undefined) return;
  if (!isPlainObject(requested)) {
    list.add('CODE_REQUESTED_INVALID', 'requested', 'requested must be an object');
    return;
  }
  unknownKeys(list, 'CODE_REQUESTED_INVALID', 'requested', requested, [
    'network',
    'hosts',
    ...REQUESTED_INTEGERS.map(([k]) => k),
  ]);
  if (requested.network !== undefined && typeof requested.network !== 'boolean')
    list.add('CODE_REQUESTED_INVALID', 'requested.network', 'network must be a boolean');
  checkHosts(list, requested.hosts, requested.network === true);
  for (const [key, min, max] of REQUESTED_INTEGERS) {
    const v = requested[key];
    if (v === undefined) continue;
    if (!(typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max)) {
      list.add(
        'CODE_REQUESTED_INVALID',
        join('requested', key),
        `${key} must be an integer between ${min} and ${max} (got ${JSON.stringify(v)})`,
      );
    }
  }
}

/** A handler name as the worker protocol accepts it. */
export const HANDLER_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

function checkHandlers(list: ViolationList, handlers: unknown): void {
  if (handlers === undefined) return;
  if (!Array.isArray(handlers) || handlers.length === 0 || handlers.length > CODE_LIMITS.handlers) {
    list.add(
      'CODE_HANDLERS_INVALID',
      'handlers',
      `handlers must be a non-empty array of at most ${CODE_LIMITS.handlers} handler names`,
    );
    return;
  }
  const seen = new Set<unknown>();
  handlers.forEach((h, i) => {
    if (typeof h !== 'string' || !HANDLER_NAME_RE.test(h))
      list.add(
        'CODE_HANDLERS_INVALID',
        join('handlers', i),
        `${JSON.stringify(h)} is not a handler name (an identifier)`,
      );
    else if (seen.has(h)) list.add('CODE_HANDLERS_INVALID', join('handlers', i), `${h} is listed twice`);
    seen.add(h);
  });
}

export interface CodeRecordCheck {
  ok: boolean;
  violations: RecordViolation[];
  record?: CodeRecord;
  /** The DID that published the referenced runtime record (authority of runtimeRecord.uri). */
  runtimePublisher?: string;
}

/** Checks every rule of a code record and collects every violation. Never throws. */
export function validateCodeRecord(value: unknown): CodeRecordCheck {
  const list = new ViolationList();
  if (!isPlainObject(value)) {
    list.add('CODE_RECORD_INVALID', '', 'a code record must be an object');
    return { ok: false, violations: list.items };
  }
  unknownKeys(list, 'CODE_RECORD_INVALID', '', value, [
    '$type',
    'runtime',
    'runtimeRecord',
    'blob',
    'entrypoint',
    'additions',
    'requested',
    'handlers',
    'description',
    'createdAt',
  ]);
  if (value.$type !== CODE_RECORD_NSID)
    list.add('CODE_RECORD_INVALID', '$type', `$type must be ${CODE_RECORD_NSID} (got ${JSON.stringify(value.$type)})`);
  if (
    typeof value.runtime !== 'string' ||
    value.runtime.length > CODE_LIMITS.nameLength ||
    !RUNTIME_NAME_RE.test(value.runtime)
  ) {
    list.add(
      'CODE_RECORD_INVALID',
      'runtime',
      `runtime must be a canonical runtime name (got ${JSON.stringify(value.runtime)})`,
    );
  }
  if (
    value.description !== undefined &&
    (typeof value.description !== 'string' || value.description.length > CODE_LIMITS.descriptionLength)
  ) {
    list.add(
      'CODE_RECORD_INVALID',
      'description',
      `description must be a string of at most ${CODE_LIMITS.descriptionLength} characters`,
    );
  }
  if (!isDatetime(value.createdAt))
    list.add(
      'CODE_RECORD_INVALID',
      'createdAt',
      `createdAt must be an RFC 3339 datetime (got ${JSON.stringify(value.createdAt)})`,
    );

  // runtimeRecord: strong ref to a V2 runtime record.
  let runtimeCid: string | undefined;
  let runtimePublisher: string | undefined;
  const rr = value.runtimeRecord;
  if (!isPlainObject(rr))
    list.add('CODE_RUNTIME_REF_INVALID', 'runtimeRecord', 'runtimeRecord must be a strong ref { uri, cid }');
  else {
    unknownKeys(list, 'CODE_RUNTIME_REF_INVALID', 'runtimeRecord', rr, ['uri', 'cid', '$type']);
    if (rr.$type !== undefined && rr.$type !== 'com.atproto.repo.strongRef')
      list.add(
        'CODE_RUNTIME_REF_INVALID',
        'runtimeRecord.$type',
        'runtimeRecord.$type must be com.atproto.repo.strongRef when present',
      );
    const parsed = parseRecordUriOf(rr.uri, RUNTIME_RECORD_NSID);
    if (!parsed)
      list.add(
        'CODE_RUNTIME_REF_INVALID',
        'runtimeRecord.uri',
        `runtimeRecord.uri must be at://<did>/${RUNTIME_RECORD_NSID}/<rkey> (got ${JSON.stringify(rr.uri)})`,
      );
    else runtimePublisher = parsed.did;
    for (const issue of cidIssues(rr.cid, DAG_CBOR_CODEC))
      list.add('CODE_RUNTIME_REF_INVALID', 'runtimeRecord.cid', `runtimeRecord.cid ${issue}`);
    // The binding is string equality with whatever CID the record pins, valid or not.
    if (typeof rr.cid === 'string') runtimeCid = rr.cid;
  }

  // blob: raw sha256 CIDv1, bound to the runtime record by its MIME subtype.
  const blob = value.blob;
  if (!isPlainObject(blob))
    list.add('CODE_BLOB_INVALID', 'blob', 'blob must be a blob ref { $type: "blob", ref, mimeType, size }');
  else {
    unknownKeys(list, 'CODE_BLOB_INVALID', 'blob', blob, ['$type', 'ref', 'mimeType', 'size']);
    if (blob.$type !== 'blob') list.add('CODE_BLOB_INVALID', 'blob.$type', 'blob.$type must be "blob"');
    const link = blobRefLink(blob.ref);
    if (link === null) list.add('CODE_BLOB_INVALID', 'blob.ref', 'blob.ref must be { $link: <cid> }');
    else for (const issue of cidIssues(link, RAW_CODEC)) list.add('CODE_BLOB_INVALID', 'blob.ref', `blob CID ${issue}`);
    if (!(typeof blob.size === 'number' && Number.isSafeInteger(blob.size) && blob.size > 0))
      list.add('CODE_BLOB_INVALID', 'blob.size', 'blob.size must be a positive integer');
    if (typeof blob.mimeType !== 'string')
      list.add('CODE_MIME_MISMATCH', 'blob.mimeType', 'blob.mimeType must be a string');
    else if (runtimeCid !== undefined && blob.mimeType !== `application/${runtimeCid}`) {
      list.add(
        'CODE_MIME_MISMATCH',
        'blob.mimeType',
        `blob.mimeType must be exactly application/${runtimeCid} (the runtime record's CID), got ${JSON.stringify(blob.mimeType)}`,
      );
    } else if (runtimeCid === undefined && !blob.mimeType.startsWith('application/')) {
      list.add(
        'CODE_MIME_MISMATCH',
        'blob.mimeType',
        `blob.mimeType must be application/<runtime record CID>, got ${JSON.stringify(blob.mimeType)}`,
      );
    }
  }

  if (typeof value.entrypoint !== 'string')
    list.add('CODE_ENTRYPOINT_INVALID', 'entrypoint', 'entrypoint must be a string');
  else {
    for (const p of canonicalRelativePath(value.entrypoint).problems)
      list.add('CODE_ENTRYPOINT_INVALID', 'entrypoint', `entrypoint ${JSON.stringify(value.entrypoint)} ${p.message}`);
  }

  const additions = value.additions;
  if (additions !== undefined) {
    if (!Array.isArray(additions))
      list.add('CODE_RECORD_INVALID', 'additions', 'additions must be an array of image references');
    else {
      if (additions.length > CODE_LIMITS.additions)
        list.add('CODE_RECORD_INVALID', 'additions', `at most ${CODE_LIMITS.additions} additions`);
      const seen = new Set<unknown>();
      additions.forEach((ref, i) => {
        for (const issue of digestReferenceIssues(ref))
          list.add('CODE_ADDITION_NOT_DIGEST', join('additions', i), issue);
        if (seen.has(ref))
          list.add('CODE_RECORD_INVALID', join('additions', i), `addition ${JSON.stringify(ref)} is listed twice`);
        seen.add(ref);
      });
    }
  }
  checkRequested(list, value.requested);
  checkHandlers(list, value.handlers);

  if (!list.ok) return { ok: false, violations: list.items };
  // why: every field was checked above (list.ok)
  return {
    ok: true,
    violations: [],
    record: value as unknown as CodeRecord,
    ...(runtimePublisher ? { runtimePublisher } : {}),
  };
}

/** Validates and returns the typed record; throws RecordValidationError listing every violation. */
export function assertCodeRecord(value: unknown): CodeRecord {
  const check = validateCodeRecord(value);
  if (!check.ok || !check.record) throw new RecordValidationError('code record', check.violations);
  return check.record;
}

/** The DID of the runtime record's publisher, from `runtimeRecord.uri` (for `checkPublisher`). */
export function runtimePublisherOf(code: Pick<CodeRecord, 'runtimeRecord'>): string {
  const parsed = parseRecordUriOf(code.runtimeRecord.uri, RUNTIME_RECORD_NSID);
  if (!parsed)
    throw new RecordValidationError('code record', [
      { code: 'CODE_RUNTIME_REF_INVALID', path: 'runtimeRecord.uri', message: 'not a V2 runtime record URI' },
    ]);
  return parsed.did;
}

/** The DID that published the runtime record at `uri`, or null when `uri` does not name a V2 runtime record. */
export function runtimePublisherOfUri(uri: string): string | null {
  return parseRecordUriOf(uri, RUNTIME_RECORD_NSID)?.did ?? null;
}

/**
 * Step 4–5 of PDS-first execution: the runtime record fetched from `runtimeRecord.uri` must have the CID the
 * code record names, which is also the blob's MIME subtype. Throws `RUNTIME_BINDING_MISMATCH` otherwise.
 */
export function checkRuntimeBinding(code: Pick<CodeRecord, 'runtimeRecord' | 'blob'>, fetched: StrongRef): void {
  const violations: RecordViolation[] = [];
  if (fetched.uri !== code.runtimeRecord.uri) {
    violations.push({
      code: 'RUNTIME_BINDING_MISMATCH',
      path: 'runtimeRecord.uri',
      message: `fetched ${fetched.uri}, the code record names ${code.runtimeRecord.uri}`,
    });
  }
  if (fetched.cid !== code.runtimeRecord.cid) {
    violations.push({
      code: 'RUNTIME_BINDING_MISMATCH',
      path: 'runtimeRecord.cid',
      message: `the runtime record has CID ${fetched.cid}, the code record pins ${code.runtimeRecord.cid}`,
    });
  }
  if (code.blob.mimeType !== `application/${fetched.cid}`) {
    violations.push({
      code: 'RUNTIME_BINDING_MISMATCH',
      path: 'blob.mimeType',
      message: `blob.mimeType ${code.blob.mimeType} does not name the runtime record's CID ${fetched.cid}`,
    });
  }
  if (violations.length > 0) throw new RecordValidationError('runtime binding', violations);
}
