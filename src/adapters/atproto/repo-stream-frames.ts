// Frames of the repo event stream (com.atproto.sync.subscribeRepos), decoded into plain typed messages.
//
// Each binary WebSocket message is two DAG-CBOR objects back to back: a header `{ op, t }` and a body. op 1 is a
// message whose type `t` is `#commit`, `#identity`, `#account`, `#sync` or `#info`; op -1 is an error `{ error,
// message }` after which the server closes. @ipld/dag-cbor decodes exactly one object, so the header's end is found
// by walking its CBOR item heads (cborItemEnd), and each half is then decoded strictly on its own.
//
// A commit is reduced to what a consumer needs to find records: (seq, repo, rev, time) and each op's action, path
// and CID. Its CAR `blocks` are not decoded: a record seen here is fetched afterwards through the verified reader
// (reader.ts), with its proof, so nothing on the stream is trusted beyond naming the record.

import * as dagCbor from '@ipld/dag-cbor';
import { CID } from 'multiformats/cid';
import { AtprotoError } from './errors.ts';

export type RepoOpAction = 'create' | 'update' | 'delete';

/** One write of a commit: `path` is `<collection>/<rkey>`; `cid` is the new record's CID (null for a delete). */
export interface RepoOp {
  action: RepoOpAction;
  path: string;
  collection: string;
  rkey: string;
  cid: string | null;
}

export type RepoStreamMessage =
  | { type: 'commit'; seq: number; repo: string; rev: string; time: string; tooBig: boolean; ops: RepoOp[] }
  | { type: 'identity'; seq: number; did: string; time: string; handle?: string }
  | { type: 'account'; seq: number; did: string; time: string; active: boolean; status?: string }
  | { type: 'sync'; seq: number; did: string; rev: string; time: string }
  /** No seq. `OutdatedCursor`: the cursor asked for is older than the server keeps, events may have been missed. */
  | { type: 'info'; name: string; message?: string };

export type RepoStreamFrame =
  | { kind: 'message'; message: RepoStreamMessage }
  /** A message type this client does not know (skipped; its seq, when it has one, still counts as seen). */
  | { kind: 'unknown'; t: string | undefined; seq?: number }
  | { kind: 'error'; error: string; message?: string };

/**
 * The stream failed: an error frame the server sent (REPO_STREAM_ERROR, its name, e.g. `FutureCursor`, in
 * `details.error`), a frame that could not be decoded, or a server that could not be reached again.
 */
export class RepoStreamError extends AtprotoError {
  constructor(
    code: 'REPO_STREAM_ERROR' | 'REPO_STREAM_FRAME_INVALID' | 'REPO_STREAM_UNAVAILABLE',
    message: string,
    details?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(code, message, details, options);
  }
}

const NSID_PREFIX = 'com.atproto.sync.subscribeRepos#';

/** Where the CBOR data item starting at `start` ends. Throws on truncated input and indefinite lengths. */
export function cborItemEnd(bytes: Uint8Array, start: number): number {
  let pos = start;
  let pending = 1; // items still to walk: an array or map adds its children, a tag its one item
  while (pending > 0) {
    pending--;
    if (pos >= bytes.length) throw new Error('truncated CBOR item');
    const head = bytes[pos++]!;
    const major = head >> 5;
    const info = head & 0x1f;
    let arg: number;
    if (info < 24) arg = info;
    else if (info <= 27) {
      const n = 1 << (info - 24); // 1, 2, 4 or 8 bytes
      if (pos + n > bytes.length) throw new Error('truncated CBOR item head');
      arg = 0;
      for (let i = 0; i < n; i++) arg = arg * 256 + bytes[pos + i]!;
      pos += n;
    } else throw new Error(`CBOR additional info ${info} (indefinite length or reserved) is not DAG-CBOR`);
    if (major === 2 || major === 3) {
      if (!Number.isSafeInteger(arg) || pos + arg > bytes.length) throw new Error('truncated CBOR string');
      pos += arg;
    } else if (major === 4) pending += arg;
    else if (major === 5) pending += 2 * arg;
    else if (major === 6) pending += 1;
    if (!Number.isSafeInteger(pending)) throw new Error('CBOR item count out of range');
  }
  return pos;
}

const invalid = (why: string, cause?: unknown): RepoStreamError =>
  new RepoStreamError(
    'REPO_STREAM_FRAME_INVALID',
    `invalid repo event stream frame: ${why}`,
    { why },
    cause === undefined ? undefined : { cause },
  );

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !CID.asCID(v);

function field<T>(body: Record<string, unknown>, key: string, ok: (v: unknown) => v is T, what: string): T {
  const v = body[key];
  if (!ok(v)) throw invalid(`${key} must be ${what} (got ${typeof v})`);
  return v;
}
const isString = (v: unknown): v is string => typeof v === 'string';
const isSeq = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isBool = (v: unknown): v is boolean => typeof v === 'boolean';

function decodeOp(op: unknown, i: number): RepoOp {
  if (!isObject(op)) throw invalid(`ops[${i}] is not a map`);
  const action = op.action;
  if (action !== 'create' && action !== 'update' && action !== 'delete')
    throw invalid(`ops[${i}].action ${JSON.stringify(action)} is not create, update or delete`);
  const path = op.path;
  const slash = typeof path === 'string' ? path.indexOf('/') : -1;
  if (typeof path !== 'string' || slash <= 0 || slash === path.length - 1 || path.indexOf('/', slash + 1) !== -1)
    throw invalid(`ops[${i}].path ${JSON.stringify(path)} is not <collection>/<rkey>`);
  const cid = op.cid === null || op.cid === undefined ? null : CID.asCID(op.cid);
  if (cid === null && op.cid !== null && op.cid !== undefined) throw invalid(`ops[${i}].cid is not a CID link`);
  if (cid === null && action !== 'delete') throw invalid(`ops[${i}] is a ${action} without a CID`);
  return { action, path, collection: path.slice(0, slash), rkey: path.slice(slash + 1), cid: cid?.toString() ?? null };
}

function decodeMessage(t: string, body: Record<string, unknown>): RepoStreamMessage | null {
  switch (t) {
    case '#commit': {
      const ops = field(body, 'ops', Array.isArray, 'an array');
      return {
        type: 'commit',
        seq: field(body, 'seq', isSeq, 'a sequence number'),
        repo: field(body, 'repo', isString, 'a DID'),
        rev: field(body, 'rev', isString, 'a string'),
        time: field(body, 'time', isString, 'a datetime'),
        tooBig: body.tooBig === true,
        ops: (ops as unknown[]).map(decodeOp),
      };
    }
    case '#identity':
      return {
        type: 'identity',
        seq: field(body, 'seq', isSeq, 'a sequence number'),
        did: field(body, 'did', isString, 'a DID'),
        time: field(body, 'time', isString, 'a datetime'),
        ...(typeof body.handle === 'string' ? { handle: body.handle } : {}),
      };
    case '#account':
      return {
        type: 'account',
        seq: field(body, 'seq', isSeq, 'a sequence number'),
        did: field(body, 'did', isString, 'a DID'),
        time: field(body, 'time', isString, 'a datetime'),
        active: field(body, 'active', isBool, 'a boolean'),
        ...(typeof body.status === 'string' ? { status: body.status } : {}),
      };
    case '#sync':
      return {
        type: 'sync',
        seq: field(body, 'seq', isSeq, 'a sequence number'),
        did: field(body, 'did', isString, 'a DID'),
        rev: field(body, 'rev', isString, 'a string'),
        time: field(body, 'time', isString, 'a datetime'),
      };
    case '#info':
      return {
        type: 'info',
        name: field(body, 'name', isString, 'a string'),
        ...(typeof body.message === 'string' ? { message: body.message } : {}),
      };
    default:
      return null;
  }
}

/** Decodes one binary message of the stream. Throws RepoStreamError REPO_STREAM_FRAME_INVALID naming the problem. */
export function decodeRepoStreamFrame(bytes: Uint8Array): RepoStreamFrame {
  let header: unknown;
  let body: unknown;
  try {
    const split = cborItemEnd(bytes, 0);
    if (split >= bytes.length) throw new Error('the frame has a header and no body');
    header = dagCbor.decode(bytes.subarray(0, split));
    body = dagCbor.decode(bytes.subarray(split));
  } catch (err) {
    throw invalid(`not two DAG-CBOR objects: ${(err as Error).message}`, err);
  }
  if (!isObject(header)) throw invalid('the header is not a map');
  if (!isObject(body)) throw invalid('the body is not a map');
  if (header.op === -1) {
    if (typeof body.error !== 'string') throw invalid('an error frame without an error name');
    return { kind: 'error', error: body.error, ...(typeof body.message === 'string' ? { message: body.message } : {}) };
  }
  if (header.op !== 1) throw invalid(`unknown frame op ${JSON.stringify(header.op)}`);
  const raw = header.t;
  if (raw !== undefined && typeof raw !== 'string') throw invalid('the header type t is not a string');
  const t = raw?.startsWith(NSID_PREFIX) ? raw.slice(NSID_PREFIX.length - 1) : raw;
  const message = t === undefined ? null : decodeMessage(t, body);
  if (message) return { kind: 'message', message };
  return { kind: 'unknown', t, ...(isSeq(body.seq) ? { seq: body.seq } : {}) };
}

/** A record created in a repo, as the stream names it: fetch it through the verified reader before trusting it. */
export interface CreatedRecord {
  seq: number;
  repo: string;
  uri: string;
  cid: string;
}

/** The creates of `collection` in a message (none for anything but a commit), in the commit's order. */
export function createsOf(message: RepoStreamMessage, collection: string): CreatedRecord[] {
  if (message.type !== 'commit') return [];
  const out: CreatedRecord[] = [];
  for (const op of message.ops)
    if (op.action === 'create' && op.collection === collection && op.cid !== null)
      out.push({
        seq: message.seq,
        repo: message.repo,
        uri: `at://${message.repo}/${op.collection}/${op.rkey}`,
        cid: op.cid,
      });
  return out;
}
