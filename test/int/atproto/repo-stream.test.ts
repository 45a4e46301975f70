// The repo event stream client on the real in-process PDS (@atproto/dev-env): job records written in an account
// show up on com.atproto.sync.subscribeRepos with their seq, URI and CID; a stream resumed from an acknowledged
// cursor gets only what came after; a burst of jobs through a small buffer arrives complete and in order; and the
// PDS's own error frame (FutureCursor) ends the stream with a typed error.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AT_RUN_V2,
  fetchRecord,
  jobCreatesOf,
  openRepoStream,
  type CreatedRecord,
  type RepoStream,
  type StrongRef,
} from '../../../src/adapters/atproto/index.ts';
import { DEFAULT_OPERATOR_POLICY } from '../../../src/domain/at-run/operator-policy.ts';
import { validateJobRecord } from '../../../src/domain/at-run/job-record.ts';
import { startTestPds, type TestAccount, type TestPds } from '../../support/pds.ts';

const JOB = AT_RUN_V2.job;

let pds: TestPds;
let alice: TestAccount;
let runner: TestAccount;

beforeAll(async () => {
  pds = await startTestPds();
  alice = await pds.createAccount('alice.test');
  runner = await pds.createAccount('runner.test');
});

afterAll(async () => {
  await pds?.close();
});

let n = 0;
async function writeJob(): Promise<StrongRef> {
  n++;
  return alice.publisher.putRecord(JOB, undefined, {
    code: `at://${alice.did}/${AT_RUN_V2.code}/3lcode`,
    handler: 'main',
    input: { n },
    runner: runner.did,
    createdAt: new Date().toISOString(),
  });
}

/** Reads `stream` until `count` job creates were seen, acknowledging every message with a seq. */
async function jobs(stream: RepoStream, count: number, slow = false): Promise<CreatedRecord[]> {
  const seen: CreatedRecord[] = [];
  const seqs: number[] = [];
  for await (const message of stream) {
    seen.push(...jobCreatesOf(message));
    if ('seq' in message) {
      seqs.push(message.seq);
      stream.ack(message.seq);
    }
    if (seen.length >= count) break;
    if (slow) await new Promise((r) => setImmediate(r));
  }
  // Strictly increasing: no event twice, none out of order.
  expect(seqs).toEqual([...new Set(seqs)].sort((a, b) => a - b));
  return seen;
}

describe('the repo event stream of the in-process PDS', () => {
  let cursor = 0;

  it('shows the job records written in an account, with their seq, URI and CID', async () => {
    const stream = openRepoStream({ service: pds.pdsUrl, cursor: 0 });
    try {
      const written = [await writeJob(), await writeJob(), await writeJob()];
      const seen = await jobs(stream, 3);
      expect(seen.map(({ uri, cid }) => ({ uri, cid }))).toEqual(written);
      expect(seen.every((j) => j.repo === alice.did)).toBe(true);
      expect(seen.map((j) => j.seq)).toEqual([...seen.map((j) => j.seq)].sort((a, b) => a - b));
      cursor = stream.cursor!;
      expect(cursor).toBe(seen[2]!.seq);
      // The stream only names a record: the runner fetches it with its proof, and it is a valid job.
      const fetched = await fetchRecord(seen[0]!.uri, { plcUrl: pds.plcUrl, expectCid: seen[0]!.cid });
      expect(validateJobRecord(fetched.value, DEFAULT_OPERATOR_POLICY)).toMatchObject({
        ok: true,
        record: { runner: runner.did, handler: 'main', input: { n: 1 } },
      });
      expect(stream.counters.reconnects).toBe(0);
    } finally {
      await stream.close();
    }
  });

  it('resumed from an acknowledged cursor, gets only the jobs written after it', async () => {
    const later = [await writeJob(), await writeJob()];
    const stream = openRepoStream({ service: pds.pdsUrl, cursor });
    try {
      const seen = await jobs(stream, 2);
      expect(seen.map(({ uri, cid }) => ({ uri, cid }))).toEqual(later);
      expect(seen.every((j) => j.seq > cursor)).toBe(true);
      expect(stream.counters.duplicates).toBe(0);
      cursor = stream.cursor!;
    } finally {
      await stream.close();
    }
  });

  it('takes a burst of 200 jobs through a buffer of 16 complete and in order, the buffer never over 16', async () => {
    const written: StrongRef[] = [];
    for (let i = 0; i < 200; i++) written.push(await writeJob());
    // The PDS replays the whole burst at once from the cursor: far faster than the consumer takes it.
    const stream = openRepoStream({ service: pds.pdsUrl, cursor, bufferSize: 16 });
    try {
      const seen = await jobs(stream, 200, true);
      expect(seen.map(({ uri, cid }) => ({ uri, cid }))).toEqual(written);
      expect(stream.counters.maxBuffered).toBeLessThanOrEqual(16);
      expect(stream.counters.pauses).toBeGreaterThan(0);
      expect(stream.counters.reconnects).toBe(0);
    } finally {
      await stream.close();
    }
  });

  it('ends with REPO_STREAM_ERROR when the PDS answers a cursor in the future with FutureCursor', async () => {
    const stream = openRepoStream({ service: pds.pdsUrl, cursor: 1_000_000_000 });
    try {
      await expect(stream[Symbol.asyncIterator]().next()).rejects.toMatchObject({
        code: 'REPO_STREAM_ERROR',
        details: { error: 'FutureCursor' },
      });
    } finally {
      await stream.close();
    }
  });
});
