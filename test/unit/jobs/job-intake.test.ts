// The job intake with its parts faked (no PDS, no log): which jobs it records, which it refuses and why, which it
// leaves alone, and that it takes each job once, keeps its cursor behind what it has taken, and stops reading while
// the policy's executions are all in flight.
import { describe, expect, it } from 'vitest';
import type { RepoStream, RepoStreamMessage } from '../../../src/adapters/atproto/index.ts';
import { AtprotoError, cidForRecordJson } from '../../../src/adapters/atproto/index.ts';
import { jobExecutionId } from '../../../src/adapters/ids.ts';
import { JobRate } from '../../../src/domain/at-run/job-rate.ts';
import { DEFAULT_OPERATOR_POLICY, type OperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import { X25519PrivateKey } from '../../../src/domain/at-run/x25519-keys.ts';
import type { ExecutionRequest, Refusal } from '../../../src/domain/execution-events.ts';
import { JobIntake, type JobIntakeDeps } from '../../../src/supervisor/jobs/job-intake.ts';

const RUNNER = 'did:plc:runnerrunnerrunnerrunner';
const ALICE = 'did:plc:alicealicealicealicealic';
const JOB = 'dev.mainasara.at-run.beta.v2.job';
const CODE = `at://${ALICE}/dev.mainasara.at-run.beta.v2.code/greet`;
const NOW = Date.parse('2026-06-01T00:00:00.000Z');
const cidOf = (n: number) => cidForRecordJson({ n });

const jobRecord = (over: Record<string, unknown> = {}) => ({
  $type: JOB,
  code: CODE,
  handler: 'greet',
  input: { name: 'Ada' },
  runner: RUNNER,
  createdAt: '2026-06-01T00:00:00.000Z',
  ...over,
});

const commit = (seq: number, rkeys: string[], repo = ALICE): RepoStreamMessage => ({
  type: 'commit',
  seq,
  repo,
  rev: `rev${seq}`,
  time: '2026-06-01T00:00:00.000Z',
  tooBig: false,
  ops: rkeys.map((rkey, i) => ({
    action: 'create' as const,
    path: `${JOB}/${rkey}`,
    collection: JOB,
    rkey,
    cid: cidOf(seq * 10 + i),
  })),
});

/** A stream that hands out the messages given, then waits until closed; acks are kept, reads counted. */
function fakeStream(messages: RepoStreamMessage[], acks: number[], reads = { n: 0 }): RepoStream {
  let closed = false;
  let wake = () => undefined as void;
  return {
    ack: (seq) => void acks.push(seq),
    cursor: undefined,
    counters: {
      received: 0,
      buffered: 0,
      maxBuffered: 0,
      reconnects: 0,
      pauses: 0,
      duplicates: 0,
      skipped: 0,
      errorFrames: 0,
    },
    lastError: undefined,
    close: async () => {
      closed = true;
      wake();
    },
    async *[Symbol.asyncIterator]() {
      for (const m of messages) {
        if (closed) return;
        reads.n++;
        yield m;
      }
      if (!closed) await new Promise<void>((r) => (wake = r));
    },
  };
}

function harness(opts: {
  messages: RepoStreamMessage[];
  records: Record<string, unknown | Error>;
  policy?: Partial<OperatorPolicy>;
  cursor?: number;
}) {
  const recorded: { request: ExecutionRequest; refused?: Refusal }[] = [];
  const log = new Set<string>();
  const acks: number[] = [];
  const cursorWrites: number[] = [];
  const opened: (number | undefined)[] = [];
  const reads = { n: 0 };
  const policy = { ...DEFAULT_OPERATOR_POLICY, ...opts.policy } as OperatorPolicy;
  let now = NOW;
  const deps: JobIntakeDeps = {
    runnerDid: RUNNER,
    policy,
    open: (cursor) => {
      opened.push(cursor);
      return fakeStream(opts.messages, acks, reads);
    },
    fetch: async (uri) => {
      const r = opts.records[uri.split('/').pop()!];
      if (r instanceof Error) throw r;
      if (r === undefined) throw new AtprotoError('RECORD_NOT_FOUND', `${uri} is not there`);
      return { value: r };
    },
    exists: async (id) => log.has(id),
    record: async (request, refused) => {
      if (log.has(request.executionId)) return 'exists';
      log.add(request.executionId);
      recorded.push({ request, ...(refused ? { refused } : {}) });
      return 'recorded';
    },
    inFlight: () => 0,
    ended: () => new Promise((r) => setTimeout(r, 5)),
    cursor: { read: async () => opts.cursor, write: async (seq) => void cursorWrites.push(seq) },
    rate: new JobRate(policy.jobs, () => now),
    nowMs: () => now,
    log: () => undefined,
    cursorEveryMs: 60_000,
  };
  return { deps, recorded, acks, cursorWrites, opened, log, reads, advance: (ms: number) => (now += ms) };
}

const settle = () => new Promise((r) => setTimeout(r, 20));

describe('the job intake', () => {
  it('records a job addressed to this runner as an execution keyed by the job, with the job and its caller', async () => {
    const h = harness({ messages: [commit(1, ['3kaaa'])], records: { '3kaaa': jobRecord({ codeCid: cidOf(99) }) } });
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    const uri = `at://${ALICE}/${JOB}/3kaaa`;
    expect(h.recorded).toEqual([
      {
        request: {
          executionId: jobExecutionId(uri, cidOf(10)),
          uri: CODE,
          handler: 'greet',
          input: { name: 'Ada' },
          callerDid: ALICE,
          timeoutMs: DEFAULT_OPERATOR_POLICY.defaults.timeoutMs,
          job: { uri, cid: cidOf(10), codeCid: cidOf(99) },
        },
      },
    ]);
    expect(intake.counters).toMatchObject({ taken: 1, refused: 0, ignored: 0 });
    await intake.close();
  });

  it('copies the secrets the job names into its request, as the strong ref only', async () => {
    const secrets = {
      $type: 'com.atproto.repo.strongRef',
      uri: `at://${ALICE}/dev.mainasara.at-run.beta.v2.secrets/3ksec`,
      cid: cidOf(77),
    };
    const h = harness({ messages: [commit(1, ['3ksec'])], records: { '3ksec': jobRecord({ secrets }) } });
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(h.recorded[0]?.request.job).toEqual({
      uri: `at://${ALICE}/${JOB}/3ksec`,
      cid: cidOf(10),
      secrets: { uri: secrets.uri, cid: secrets.cid },
    });
    await intake.close();
  });

  it("copies the job's resultKey into its request, so the receipt seals the result to it", async () => {
    const resultKey = X25519PrivateKey.generate().publicKey;
    const h = harness({ messages: [commit(1, ['3kkey'])], records: { '3kkey': jobRecord({ resultKey }) } });
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(h.recorded[0]?.request.job).toEqual({ uri: `at://${ALICE}/${JOB}/3kkey`, cid: cidOf(10), resultKey });
    await intake.close();
  });

  it('refuses a job whose resultKey is not an X25519 did:key, with JOB_RESULT_KEY_INVALID', async () => {
    const h = harness({
      messages: [commit(1, ['3kbad'])],
      records: { '3kbad': jobRecord({ resultKey: 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK' }) },
    });
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(h.recorded[0]?.refused).toMatchObject({ code: 'JOB_RESULT_KEY_INVALID' });
    expect(intake.counters).toMatchObject({ taken: 0, refused: 1 });
    await intake.close();
  });

  it('leaves a job for another runner, and an unaddressed one unless the policy takes them, without a trace', async () => {
    const records = {
      '3kother': jobRecord({ runner: 'did:plc:someoneelsesomeoneelseso' }),
      '3knone': jobRecord({ runner: undefined }),
    };
    const strict = harness({ messages: [commit(1, ['3kother', '3knone'])], records });
    const a = new JobIntake(strict.deps);
    await a.start();
    await settle();
    expect(strict.recorded).toEqual([]);
    expect(a.counters.ignored).toBe(2);
    await a.close();
    const open = harness({
      messages: [commit(1, ['3kother', '3knone'])],
      records,
      policy: { jobs: { ...DEFAULT_OPERATOR_POLICY.jobs, acceptUnaddressed: true } },
    });
    const b = new JobIntake(open.deps);
    await b.start();
    await settle();
    expect(open.recorded.map((r) => r.request.job?.uri)).toEqual([`at://${ALICE}/${JOB}/3knone`]);
    await b.close();
  });

  it('refuses, with a typed code for its receipt, a forged job, an invalid one, an expired one and a flood', async () => {
    const h = harness({
      messages: [commit(1, ['3kforged', '3kbad', '3kold', '3kr1', '3kr2'])],
      records: {
        '3kforged': new AtprotoError('RECORD_SIGNATURE_INVALID', 'the commit is not signed by the repo key'),
        '3kbad': jobRecord({ handler: 'no such handler!' }),
        '3kold': jobRecord({ notAfter: '2026-05-31T23:59:59.000Z' }),
        '3kr1': jobRecord(),
        '3kr2': jobRecord(),
      },
      policy: { jobs: { ...DEFAULT_OPERATOR_POLICY.jobs, perRepoPerMinute: 1 } },
    });
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(h.recorded.map((r) => [r.request.job?.uri.split('/').pop(), r.refused?.code ?? 'taken'])).toEqual([
      ['3kforged', 'JOB_UNVERIFIED'],
      ['3kbad', 'HANDLER_INVALID'],
      ['3kold', 'JOB_EXPIRED'],
      ['3kr1', 'taken'],
      ['3kr2', 'JOB_RATE_LIMITED'],
    ]);
    expect(h.recorded[0]!.refused!.message).toMatch(/could not be verified: the commit is not signed/);
    expect(intake.counters).toMatchObject({ taken: 1, refused: 4 });
    await intake.close();
  });

  it('takes each job once: one seen again, from a replay or another node, finds its execution and is skipped', async () => {
    const h = harness({
      messages: [commit(1, ['3kaaa']), commit(1, ['3kaaa']), commit(2, ['3kgone'])],
      records: { '3kaaa': jobRecord() },
    });
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(h.recorded).toHaveLength(1);
    expect(intake.counters).toMatchObject({ taken: 1, seenBefore: 1, gone: 1 });
    await intake.close();
  });

  it(
    'with no cursor recorded, records where it started before taking any job, ' +
      'so a kill before the first periodic record loses none',
    async () => {
      const h = harness({ messages: [commit(41, ['3kaaa']), commit(42, [])], records: { '3kaaa': jobRecord() } });
      const intake = new JobIntake(h.deps);
      await intake.start();
      await settle();
      expect(h.opened).toEqual([undefined]);
      expect(h.cursorWrites).toEqual([40]);
      expect(h.recorded).toHaveLength(1);
      await intake.close();
      expect(h.cursorWrites).toEqual([40, 42]);
    },
  );

  it('starts from the recorded cursor, records the cursor only when due or at close, and acknowledges what it recorded', async () => {
    const h = harness({ messages: [commit(8, []), commit(9, [])], records: {}, cursor: 7 });
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(h.opened).toEqual([7]);
    expect(intake.cursor).toBe(9);
    expect(h.cursorWrites).toEqual([]); // not due yet
    await intake.close();
    expect(h.cursorWrites).toEqual([9]);
    expect(h.acks).toEqual([9]);
  });

  it('stops reading while the policy’s maxRunning jobs are in flight, and goes on when one ends', async () => {
    const h = harness({
      messages: [commit(1, ['3ka']), commit(2, ['3kb'])],
      records: { '3ka': jobRecord(), '3kb': jobRecord() },
      policy: { executions: { ...DEFAULT_OPERATOR_POLICY.executions, maxRunning: 1 } },
    });
    let flying = 0;
    const record = h.deps.record;
    h.deps.record = async (r, x) => {
      flying++;
      return record(r, x);
    };
    h.deps.inFlight = () => flying;
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(h.recorded).toHaveLength(1);
    expect(intake.cursor).toBe(1); // the second message is not taken
    flying = 0;
    await settle();
    expect(h.recorded).toHaveLength(2);
    expect(intake.cursor).toBe(2);
    await intake.close();
  });
});

const rkeyOf = (uri: string) => uri.split('/').pop()!;
const outcomes = (h: ReturnType<typeof harness>) =>
  h.recorded.map((r) => [rkeyOf(r.request.job!.uri), r.refused?.code ?? 'taken']);

/** Holds each fetch until the test releases it (by rkey, the oldest first); counts the fetches under way. */
function gate(h: ReturnType<typeof harness>) {
  const fetch = h.deps.fetch;
  const held: { rkey: string; go: () => void }[] = [];
  const release = (rkey: string) =>
    held
      .splice(
        held.findIndex((f) => f.rkey === rkey),
        1,
      )[0]!
      .go();
  const g = { started: [] as string[], open: 0, most: 0, release };
  h.deps.fetch = (uri, cid) => {
    g.started.push(rkeyOf(uri));
    g.most = Math.max(g.most, ++g.open);
    return new Promise((resolve, reject) =>
      held.push({
        rkey: rkeyOf(uri),
        go: () => {
          g.open--;
          fetch(uri, cid).then(resolve, reject);
        },
      }),
    );
  };
  return g;
}

describe('the job intake, fetching ahead', () => {
  it('fetches the next jobs’ records side by side: a fetch that ends only once four are under way holds nothing up', async () => {
    const rkeys = ['3ka', '3kb', '3kc', '3kd'];
    const h = harness({
      messages: rkeys.map((rkey, i) => commit(i + 1, [rkey])),
      records: Object.fromEntries(rkeys.map((rkey) => [rkey, jobRecord()])),
    });
    const fetch = h.deps.fetch;
    let open = 0;
    let allOpen!: () => void;
    const four = new Promise<void>((r) => (allOpen = r));
    h.deps.fetch = async (uri, cid) => {
      if (++open === 4) allOpen();
      await four;
      return fetch(uri, cid);
    };
    h.deps.lookahead = 4;
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(outcomes(h)).toEqual(rkeys.map((rkey) => [rkey, 'taken']));
    expect(intake.cursor).toBe(4);
    await intake.close();
  });

  it('records in the stream’s order when the fetches end in the reverse order, and the rate limiter decides as in that order', async () => {
    const rkeys = ['3ka', '3kb', '3kc', '3kd'];
    const h = harness({
      messages: [commit(1, ['3ka', '3kb']), commit(2, ['3kc']), commit(3, ['3kd'])],
      records: Object.fromEntries(rkeys.map((rkey) => [rkey, jobRecord()])),
      policy: { jobs: { ...DEFAULT_OPERATOR_POLICY.jobs, perRepoPerMinute: 2 } },
    });
    const g = gate(h);
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(g.started).toEqual(rkeys);
    for (const rkey of ['3kd', '3kc', '3kb']) {
      g.release(rkey);
      await settle();
      expect(h.recorded).toEqual([]);
    }
    g.release('3ka');
    await settle();
    expect(outcomes(h)).toEqual([
      ['3ka', 'taken'],
      ['3kb', 'taken'],
      ['3kc', 'JOB_RATE_LIMITED'],
      ['3kd', 'JOB_RATE_LIMITED'],
    ]);
    expect(intake.counters).toMatchObject({ taken: 2, refused: 2 });
    await intake.close();
  });

  it('holds at most its lookahead of jobs, and reads no further from the stream while they wait', async () => {
    const rkeys = ['3ka', '3kb', '3kc', '3kd', '3ke', '3kf'];
    const h = harness({
      messages: rkeys.map((rkey, i) => commit(i + 1, [rkey])),
      records: Object.fromEntries(rkeys.map((rkey) => [rkey, jobRecord()])),
    });
    const g = gate(h);
    h.deps.lookahead = 3;
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(g.started).toEqual(['3ka', '3kb', '3kc']);
    expect(h.reads.n).toBe(4); // the fourth message's job waits for room, the fifth is not read
    g.release('3kb');
    await settle();
    expect(g.started).toHaveLength(3);
    expect(h.reads.n).toBe(4);
    g.release('3ka');
    await settle();
    expect(outcomes(h).map(([rkey]) => rkey)).toEqual(['3ka', '3kb']);
    expect(g.started).toEqual(['3ka', '3kb', '3kc', '3kd', '3ke']);
    expect(h.reads.n).toBe(6);
    for (const rkey of ['3kc', '3kd', '3ke', '3kf']) {
      g.release(rkey);
      await settle();
    }
    expect(outcomes(h).map(([rkey]) => rkey)).toEqual(rkeys);
    expect(g.most).toBe(3);
    await intake.close();
  });

  it('never has more than the policy’s maxRunning executions in flight, whatever it fetched ahead', async () => {
    const rkeys = ['3ka', '3kb', '3kc', '3kd', '3ke', '3kf'];
    const h = harness({
      messages: rkeys.map((rkey, i) => commit(i + 1, [rkey])),
      records: Object.fromEntries(rkeys.map((rkey) => [rkey, jobRecord()])),
      policy: { executions: { ...DEFAULT_OPERATOR_POLICY.executions, maxRunning: 2 } },
    });
    let flying = 0;
    let most = 0;
    const record = h.deps.record;
    h.deps.record = async (r, x) => {
      most = Math.max(most, ++flying);
      return record(r, x);
    };
    h.deps.inFlight = () => flying;
    const fetched: string[] = [];
    const fetch = h.deps.fetch;
    h.deps.fetch = (uri, cid) => {
      fetched.push(rkeyOf(uri));
      return fetch(uri, cid);
    };
    h.deps.lookahead = 2;
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(h.recorded).toHaveLength(2);
    expect(fetched).toEqual(['3ka', '3kb', '3kc', '3kd']); // two recorded, two waiting for room
    expect(intake.cursor).toBe(2);
    flying--;
    await settle();
    expect(h.recorded).toHaveLength(3);
    flying = 0;
    await settle();
    expect(h.recorded).toHaveLength(5);
    flying = 0;
    await settle();
    expect(outcomes(h).map(([rkey]) => rkey)).toEqual(rkeys);
    expect(most).toBe(2);
    await intake.close();
  });

  it('never moves the cursor past a job not yet recorded, even when the jobs after it are fetched', async () => {
    const h = harness({
      messages: [commit(1, ['3ka']), commit(2, ['3kb']), commit(3, []), commit(4, ['3kc']), commit(5, [])],
      records: { '3ka': jobRecord(), '3kb': jobRecord(), '3kc': jobRecord() },
      cursor: 0,
    });
    const g = gate(h);
    h.deps.cursorEveryMs = 0; // recorded whenever it moves
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(h.cursorWrites).toEqual([]);
    g.release('3ka');
    g.release('3kc');
    await settle();
    expect(outcomes(h).map(([rkey]) => rkey)).toEqual(['3ka']);
    expect(intake.cursor).toBe(1);
    expect(h.cursorWrites).toEqual([1]);
    g.release('3kb');
    await settle();
    expect(outcomes(h).map(([rkey]) => rkey)).toEqual(['3ka', '3kb', '3kc']);
    expect(intake.cursor).toBe(5);
    expect(h.cursorWrites).toEqual([1, 3, 5]); // each write behind the next job not recorded
    expect(h.acks).toEqual([1, 3, 5]);
    await intake.close();
  });

  it('closed with jobs fetched ahead, records none of them and leaves the cursor behind them, so they are read again', async () => {
    const messages = [commit(1, ['3ka']), commit(2, ['3kb', '3kc']), commit(3, [])];
    const records = { '3ka': jobRecord(), '3kb': jobRecord(), '3kc': jobRecord() };
    const h = harness({ messages, records, cursor: 0 });
    const g = gate(h);
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    g.release('3ka');
    g.release('3kc');
    await settle();
    const closing = intake.close();
    g.release('3kb'); // its fetch ends after the close began: abandoned, not recorded
    await closing;
    expect(outcomes(h)).toEqual([['3ka', 'taken']]);
    expect(h.cursorWrites).toEqual([1]);
    const again = harness({ messages: messages.filter((m) => 'seq' in m && m.seq > 1), records, cursor: 1 });
    const restarted = new JobIntake(again.deps);
    await restarted.start();
    await settle();
    expect(again.opened).toEqual([1]);
    expect(outcomes(again)).toEqual([
      ['3kb', 'taken'],
      ['3kc', 'taken'],
    ]);
    await restarted.close();
    expect(again.cursorWrites).toEqual([3]);
  });

  it('closed while a fetched job waits for room, does not record it and records the cursor before it', async () => {
    const h = harness({
      messages: [commit(1, ['3ka']), commit(2, ['3kb'])],
      records: { '3ka': jobRecord(), '3kb': jobRecord() },
      policy: { executions: { ...DEFAULT_OPERATOR_POLICY.executions, maxRunning: 1 } },
      cursor: 0,
    });
    let flying = 0;
    const record = h.deps.record;
    h.deps.record = async (r, x) => {
      flying++;
      return record(r, x);
    };
    h.deps.inFlight = () => flying;
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(outcomes(h)).toEqual([['3ka', 'taken']]);
    await intake.close();
    expect(outcomes(h)).toEqual([['3ka', 'taken']]);
    expect(h.cursorWrites).toEqual([1]);
  });

  it('refuses a forged and an unreadable job and counts a gone one as before, in order, when the fetches end out of order', async () => {
    const rkeys = ['3kforged', '3kbroken', '3kgone', '3kok'];
    const h = harness({
      messages: [commit(1, rkeys)],
      records: {
        '3kforged': new AtprotoError('RECORD_PROOF_INVALID', 'the proof does not lead to the commit'),
        '3kbroken': new Error('socket hang up'),
        '3kok': jobRecord(),
      },
    });
    const g = gate(h);
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    for (const rkey of [...rkeys].reverse()) g.release(rkey);
    await settle();
    expect(outcomes(h)).toEqual([
      ['3kforged', 'JOB_UNVERIFIED'],
      ['3kbroken', 'JOB_UNREADABLE'],
      ['3kok', 'taken'],
    ]);
    expect(h.recorded[0]!.refused!.message).toMatch(/3kforged could not be verified: the proof does not lead/);
    expect(h.recorded[1]!.refused!.message).toMatch(/3kbroken could not be verified: socket hang up/);
    expect(intake.counters).toMatchObject({ taken: 1, refused: 2, gone: 1, seenBefore: 0 });
    expect(intake.cursor).toBe(1);
    await intake.close();
  });

  it('takes a job replayed within the lookahead once, and its replay takes nothing from the rate', async () => {
    const h = harness({
      messages: [commit(1, ['3ka']), commit(1, ['3ka']), commit(2, ['3kb'])],
      records: { '3ka': jobRecord(), '3kb': jobRecord() },
      policy: { jobs: { ...DEFAULT_OPERATOR_POLICY.jobs, perRepoPerMinute: 2 } },
    });
    const g = gate(h);
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(g.started).toEqual(['3ka', '3ka', '3kb']); // both checked before the first was recorded
    for (const rkey of ['3kb', '3ka', '3ka']) g.release(rkey);
    await settle();
    expect(outcomes(h)).toEqual([
      ['3ka', 'taken'],
      ['3kb', 'taken'],
    ]);
    expect(intake.counters).toMatchObject({ taken: 2, seenBefore: 1, refused: 0 });
    await intake.close();
  });

  it('stops at a job whose check of the log failed, once the jobs before it are recorded, and keeps the cursor behind it', async () => {
    const h = harness({
      messages: [commit(1, ['3ka']), commit(2, ['3kb']), commit(3, ['3kc'])],
      records: { '3ka': jobRecord(), '3kb': jobRecord(), '3kc': jobRecord() },
      cursor: 0,
    });
    const logged: string[] = [];
    h.deps.log = (msg) => void logged.push(msg);
    const exists = h.deps.exists;
    h.deps.exists = async (id) => {
      if (id === jobExecutionId(`at://${ALICE}/${JOB}/3kb`, cidOf(20))) throw new Error('the store is unreachable');
      return exists(id);
    };
    const intake = new JobIntake(h.deps);
    await intake.start();
    await settle();
    expect(outcomes(h)).toEqual([['3ka', 'taken']]);
    expect(logged).toEqual(['job intake stopped: the store is unreachable']);
    await intake.close();
    expect(h.cursorWrites).toEqual([1]);
  });
});
