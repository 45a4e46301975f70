// Frames of com.atproto.sync.subscribeRepos built with @ipld/dag-cbor, as a relay encodes them: a header
// `{ op, t }` and a body, two DAG-CBOR objects back to back. For the repo stream's unit tests.

import * as dagCbor from '@ipld/dag-cbor';
import { CID } from 'multiformats/cid';
import * as Digest from 'multiformats/hashes/digest';
import { createHash } from 'node:crypto';

export function frame(header: Record<string, unknown>, body: unknown): Uint8Array {
  const h = dagCbor.encode(header);
  const b = dagCbor.encode(body);
  const out = new Uint8Array(h.length + b.length);
  out.set(h, 0);
  out.set(b, h.length);
  return out;
}

/** A dag-cbor CIDv1 (as a CID object, the way a commit's ops carry it) derived from `seed`. */
export function cidOf(seed: string): CID {
  return CID.createV1(0x71, Digest.create(0x12, new Uint8Array(createHash('sha256').update(seed).digest())));
}

export interface OpSpec {
  action: 'create' | 'update' | 'delete';
  path: string;
}

export function commitBody(seq: number, repo: string, ops: OpSpec[]): Record<string, unknown> {
  return {
    seq,
    rebase: false,
    tooBig: false,
    repo,
    commit: cidOf(`commit-${seq}`),
    rev: `3l${String(seq).padStart(11, '0')}`,
    since: null,
    blocks: new Uint8Array([0x0a, 0x0b]),
    ops: ops.map((o) => ({ action: o.action, path: o.path, cid: o.action === 'delete' ? null : cidOf(o.path) })),
    blobs: [],
    time: '2026-12-01T11:00:00.000Z',
  };
}

export function commitFrame(seq: number, repo: string, ops: OpSpec[]): Uint8Array {
  return frame({ op: 1, t: '#commit' }, commitBody(seq, repo, ops));
}

export function errorFrame(error: string, message?: string): Uint8Array {
  return frame({ op: -1 }, { error, ...(message ? { message } : {}) });
}
