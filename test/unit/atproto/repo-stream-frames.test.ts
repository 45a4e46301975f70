// Decoding the frames of the repo event stream (com.atproto.sync.subscribeRepos): two DAG-CBOR objects per
// message, the five message types, error frames, unknown types, malformed frames, and the filter for job creates.

import * as dagCbor from '@ipld/dag-cbor';
import { describe, expect, it } from 'vitest';
import {
  RepoStreamError,
  cborItemEnd,
  createsOf,
  decodeRepoStreamFrame,
  jobCreatesOf,
} from '../../../src/adapters/atproto/index.ts';
import { cidOf, commitBody, commitFrame, errorFrame, frame } from '../../support/repo-stream-frames.ts';

const ALICE = 'did:plc:alice00000000000000000000';
const JOB = 'dev.mainasara.at-run.beta.v2.job';

function invalid(bytes: Uint8Array): RepoStreamError {
  try {
    decodeRepoStreamFrame(bytes);
  } catch (err) {
    expect(err).toBeInstanceOf(RepoStreamError);
    expect((err as RepoStreamError).code).toBe('REPO_STREAM_FRAME_INVALID');
    return err as RepoStreamError;
  }
  throw new Error('the frame decoded');
}

describe('cborItemEnd', () => {
  it('finds the end of one DAG-CBOR object of any shape, so the body after it can be decoded alone', () => {
    const values: unknown[] = [
      0,
      23,
      24,
      65_536,
      2 ** 40,
      -1,
      -(2 ** 33),
      'é'.repeat(300),
      new Uint8Array(70_000),
      [1, [2, [3, { a: [] }]]],
      { op: 1, t: '#commit' },
      { cid: cidOf('x'), n: null, t: true, f: false },
    ];
    for (const value of values) {
      const bytes = dagCbor.encode(value);
      const joined = new Uint8Array([...bytes, 0xa0]);
      expect(cborItemEnd(joined, 0), JSON.stringify(value)?.slice(0, 40)).toBe(bytes.length);
    }
  });

  it('refuses a truncated item and indefinite lengths', () => {
    const bytes = dagCbor.encode({ key: 'a longer value' });
    expect(() => cborItemEnd(bytes.subarray(0, bytes.length - 3), 0)).toThrow(/truncated/);
    expect(() => cborItemEnd(new Uint8Array([0x9f, 0x01, 0xff]), 0)).toThrow(/indefinite/);
    expect(() => cborItemEnd(new Uint8Array([0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), 0)).toThrow();
  });
});

describe('decodeRepoStreamFrame', () => {
  it('decodes a commit: seq, repo, rev, time and each op with its collection, rkey and CID', () => {
    const bytes = commitFrame(7, ALICE, [
      { action: 'create', path: `${JOB}/3ljob1` },
      { action: 'update', path: 'app.bsky.actor.profile/self' },
      { action: 'delete', path: `${JOB}/3ljob0` },
    ]);
    expect(decodeRepoStreamFrame(bytes)).toEqual({
      kind: 'message',
      message: {
        type: 'commit',
        seq: 7,
        repo: ALICE,
        rev: '3l00000000007',
        time: '2026-12-01T11:00:00.000Z',
        tooBig: false,
        ops: [
          {
            action: 'create',
            path: `${JOB}/3ljob1`,
            collection: JOB,
            rkey: '3ljob1',
            cid: cidOf(`${JOB}/3ljob1`).toString(),
          },
          {
            action: 'update',
            path: 'app.bsky.actor.profile/self',
            collection: 'app.bsky.actor.profile',
            rkey: 'self',
            cid: cidOf('app.bsky.actor.profile/self').toString(),
          },
          { action: 'delete', path: `${JOB}/3ljob0`, collection: JOB, rkey: '3ljob0', cid: null },
        ],
      },
    });
  });

  it('decodes identity, account, sync and info messages, and a type written as the full NSID', () => {
    const time = '2026-12-01T11:00:00.000Z';
    const decode = (t: string, body: Record<string, unknown>) => decodeRepoStreamFrame(frame({ op: 1, t }, body));
    expect(decode('#identity', { seq: 1, did: ALICE, time, handle: 'alice.test' })).toEqual({
      kind: 'message',
      message: { type: 'identity', seq: 1, did: ALICE, time, handle: 'alice.test' },
    });
    expect(decode('#account', { seq: 2, did: ALICE, time, active: false, status: 'takendown' })).toEqual({
      kind: 'message',
      message: { type: 'account', seq: 2, did: ALICE, time, active: false, status: 'takendown' },
    });
    expect(decode('#sync', { seq: 3, did: ALICE, rev: '3labc', time, blocks: new Uint8Array(1) })).toEqual({
      kind: 'message',
      message: { type: 'sync', seq: 3, did: ALICE, rev: '3labc', time },
    });
    expect(decode('#info', { name: 'OutdatedCursor', message: 'Possibly missing events' })).toEqual({
      kind: 'message',
      message: { type: 'info', name: 'OutdatedCursor', message: 'Possibly missing events' },
    });
    expect(decode('com.atproto.sync.subscribeRepos#commit', commitBody(4, ALICE, []))).toMatchObject({
      kind: 'message',
      message: { type: 'commit', seq: 4, ops: [] },
    });
  });

  it('decodes an error frame into its name and message', () => {
    expect(decodeRepoStreamFrame(errorFrame('FutureCursor', 'Cursor in the future.'))).toEqual({
      kind: 'error',
      error: 'FutureCursor',
      message: 'Cursor in the future.',
    });
  });

  it('passes a type it does not know as unknown, with its seq when it has one', () => {
    expect(decodeRepoStreamFrame(frame({ op: 1, t: '#handle' }, { seq: 9, did: ALICE }))).toEqual({
      kind: 'unknown',
      t: '#handle',
      seq: 9,
    });
    expect(decodeRepoStreamFrame(frame({ op: 1 }, { x: 1 }))).toEqual({ kind: 'unknown', t: undefined });
  });

  it('refuses malformed frames with REPO_STREAM_FRAME_INVALID, naming what is wrong', () => {
    const header = dagCbor.encode({ op: 1, t: '#commit' });
    expect(invalid(header).message).toMatch(/a header and no body/);
    expect(invalid(new Uint8Array([...commitFrame(1, ALICE, []), 0x00])).message).toMatch(/not two DAG-CBOR/);
    expect(invalid(frame([1] as never, {})).message).toMatch(/header is not a map/);
    expect(invalid(frame({ op: 2 }, {})).message).toMatch(/unknown frame op 2/);
    expect(invalid(frame({ op: -1 }, { message: 'no name' })).message).toMatch(/without an error name/);
    const noSeq = commitBody(1, ALICE, []);
    delete noSeq.seq;
    expect(invalid(frame({ op: 1, t: '#commit' }, noSeq)).message).toMatch(/seq must be a sequence number/);
    const badPath = commitBody(1, ALICE, [{ action: 'create', path: 'no-slash' }]);
    expect(invalid(frame({ op: 1, t: '#commit' }, badPath)).message).toMatch(/is not <collection>\/<rkey>/);
    const noCid = commitBody(1, ALICE, [{ action: 'create', path: `${JOB}/a` }]);
    (noCid.ops as Record<string, unknown>[])[0]!.cid = null;
    expect(invalid(frame({ op: 1, t: '#commit' }, noCid)).message).toMatch(/a create without a CID/);
    const badAction = commitBody(1, ALICE, [{ action: 'create', path: `${JOB}/a` }]);
    (badAction.ops as Record<string, unknown>[])[0]!.action = 'upsert';
    expect(invalid(frame({ op: 1, t: '#commit' }, badAction)).message).toMatch(/"upsert" is not create/);
  });
});

describe('the creates of a collection', () => {
  it('lists the job records a commit creates, with the commit seq, the record URI and its CID', () => {
    const bytes = commitFrame(12, ALICE, [
      { action: 'create', path: `${JOB}/3ljob1` },
      { action: 'create', path: 'app.bsky.feed.post/3lpost' },
      { action: 'update', path: `${JOB}/3ljob0` },
      { action: 'delete', path: `${JOB}/3ljobx` },
      { action: 'create', path: `${JOB}/3ljob2` },
    ]);
    const decoded = decodeRepoStreamFrame(bytes);
    if (decoded.kind !== 'message') throw new Error('not a message');
    expect(jobCreatesOf(decoded.message)).toEqual([
      { seq: 12, repo: ALICE, uri: `at://${ALICE}/${JOB}/3ljob1`, cid: cidOf(`${JOB}/3ljob1`).toString() },
      { seq: 12, repo: ALICE, uri: `at://${ALICE}/${JOB}/3ljob2`, cid: cidOf(`${JOB}/3ljob2`).toString() },
    ]);
    expect(createsOf(decoded.message, 'app.bsky.feed.post')).toHaveLength(1);
    expect(jobCreatesOf({ type: 'info', name: 'OutdatedCursor' })).toEqual([]);
  });
});
