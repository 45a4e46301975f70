// `runlog job submit` and `runlog serve --jobs` in process, with fakes for the network: the arguments and their
// usage errors, the receipt awaited by polling (strict reads, a bounded backoff, TIMEOUT), its result checked
// against outputSha256, and a failed job's exit status taken from its failure code. (Against a real PDS and
// runner: test/int/executions/job-submit.test.ts.)
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  AT_RUN_V2,
  AtprotoError,
  cidForBlobBytes,
  cidForRecordJson,
  type AtprotoReader,
  type JsonObject,
  type Publisher,
} from '../../../src/adapters/atproto/index.ts';
import { jobExecutionId } from '../../../src/adapters/ids.ts';
import type { CommandArgs } from '../../../src/cli/command.ts';
import { parseJobSubmit, runJobSubmit } from '../../../src/cli/commands/job-command.ts';
import { main } from '../../../src/cli/main.ts';
import { awaitJobAnswer, receiptUriOf, type SubmittedJob } from '../../../src/supervisor/jobs/job-submit.ts';
import { capture } from '../../support/cli-in-process.ts';
import { partial } from '../../support/partial.ts';

const ALICE = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa';
const RUNNER = 'did:plc:rrrrrrrrrrrrrrrrrrrrrrrr';
const CODE = `at://${ALICE}/${AT_RUN_V2.code}/greet`;
const args = (positionals: string[], values: CommandArgs['values'] = {}): CommandArgs => ({
  positionals,
  values,
  db: undefined,
  home: undefined,
});

async function run(...argv: string[]) {
  const c = capture();
  const code = await main(argv, c.factory);
  return { code, out: c.stdout(), err: c.stderr() };
}

/** A publisher that keeps the job records it is given (rkey chosen as a PDS would). */
function fakePublisher() {
  const written: JsonObject[] = [];
  const publisher = partial<Publisher>({
    did: ALICE,
    putRecord: async (collection: string, _rkey: string | undefined, record: JsonObject) => {
      written.push(record);
      return {
        uri: `at://${ALICE}/${collection}/3kabcdefgh2aa`,
        cid: cidForRecordJson({ $type: collection, ...record }),
      };
    },
  });
  return { publisher, written };
}

const job: SubmittedJob = (() => {
  const uri = `at://${ALICE}/${AT_RUN_V2.job}/3kabcdefgh2aa`;
  const cid = cidForRecordJson({ $type: AT_RUN_V2.job, n: 1 });
  return { uri, cid, executionId: jobExecutionId(uri, cid) };
})();
const resultBytes = Buffer.from('{"greeting":"Hello, Ada!"}', 'utf8');
const sha256Hex = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

function receiptOf(answers: { uri: string; cid: string }, extra: Record<string, unknown> = {}): JsonObject {
  // Fields set to undefined are left out, as in a record.
  return JSON.parse(
    JSON.stringify({
      $type: AT_RUN_V2.execution,
      executionId: jobExecutionId(answers.uri, answers.cid),
      job: { uri: answers.uri, cid: answers.cid },
      outcome: 'succeeded',
      outputSha256: sha256Hex(resultBytes),
      result: { $type: 'blob', ref: { $link: cidForBlobBytes(resultBytes) }, mimeType: 'application/json', size: 26 },
      startedAt: '2026-01-01T00:00:00.000Z',
      finishedAt: '2026-01-01T00:00:01.000Z',
      ...extra,
    }),
  ) as JsonObject;
}

/** A reader on which the receipt appears after `missing` reads, and the blob store holds `blobs`. */
function fakeReader(opts: {
  receipt: (j: { uri: string; cid: string }) => JsonObject;
  missing?: number;
  blob?: Uint8Array;
}) {
  const reads: { uri: string; mode: unknown }[] = [];
  let missing = opts.missing ?? 0;
  let answers: { uri: string; cid: string } | undefined;
  const reader = partial<AtprotoReader>({
    fetchRecord: async (uri: string, o?: { mode?: unknown }) => {
      reads.push({ uri, mode: o?.mode });
      if (missing-- > 0) throw new AtprotoError('RECORD_NOT_FOUND', `${uri}: not found`);
      const value = opts.receipt(answers ?? job);
      return { uri, cid: cidForRecordJson(value), value, mode: 'strict', pdsEndpoint: 'http://pds' };
    },
    fetchBlob: async (did: string, cid: string) => {
      const bytes = opts.blob ?? resultBytes;
      expect(cid).toBe(cidForBlobBytes(resultBytes));
      return { did, cid, bytes, size: bytes.byteLength, pdsEndpoint: 'http://pds' };
    },
  });
  return { reader, reads, answer: (j: { uri: string; cid: string }) => void (answers = j) };
}

describe('job submit: its arguments', () => {
  it('reads the job from the command line', () => {
    const secretsUri = `at://${ALICE}/${AT_RUN_V2.secrets}/3ksecrets2aa`;
    const secretsCid = cidForRecordJson({ s: 1 });
    const got = parseJobSubmit(
      args(['submit', CODE, 'greet'], {
        input: '{"name":"Ada"}',
        runner: RUNNER,
        'code-cid': 'bafyreicode',
        secrets: `${secretsUri}@${secretsCid}`,
        'not-after': '2030-01-01T00:00:00Z',
        wait: true,
        timeout: '5000',
      }),
    );
    expect(got).toEqual({
      submission: {
        code: CODE,
        handler: 'greet',
        input: { name: 'Ada' },
        runner: RUNNER,
        codeCid: 'bafyreicode',
        secrets: { uri: secretsUri, cid: secretsCid },
        notAfter: '2030-01-01T00:00:00.000Z',
      },
      waitMs: 5000,
    });
    expect(parseJobSubmit(args(['submit', CODE, 'greet']))).toEqual({ submission: { code: CODE, handler: 'greet' } });
    expect(parseJobSubmit(args(['submit', CODE, 'greet'], { runner: RUNNER, wait: true })).waitMs).toBe(120_000);
  });

  it('refuses a malformed command line as a usage error (exit 2), before any account is asked for', async () => {
    const cases: [string[], RegExp][] = [
      [['job', 'submit', CODE], /usage: runlog job submit/],
      [['job', 'list'], /usage: runlog job submit/],
      [['job', 'submit', CODE, 'greet', '--input', '{nope'], /--input is not JSON/],
      [['job', 'submit', CODE, 'greet', '--wait'], /--wait needs --runner/],
      [['job', 'submit', CODE, 'greet', '--runner', RUNNER, '--timeout', '10'], /--timeout bounds --wait/],
      [['job', 'submit', CODE, 'greet', '--runner', RUNNER, '--wait', '--timeout', 'soon'], /--timeout must be/],
      [['job', 'submit', CODE, 'greet', '--secrets', 'bafyrei'], /--secrets must be <at-uri>@<cid>/],
      [['job', 'submit', CODE, 'greet', '--not-after', 'tomorrow'], /--not-after must be an RFC 3339/],
    ];
    for (const [argv, message] of cases) {
      const r = await run(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err).toMatch(message);
    }
  });

  describe('without an account', () => {
    beforeEach(() => {
      for (const v of ['RUNLOG_PDS_URL', 'RUNLOG_IDENTIFIER', 'RUNLOG_PASSWORD']) vi.stubEnv(v, '');
    });
    afterEach(() => vi.unstubAllEnvs());

    it('job submit says which account it needs', async () => {
      const r = await run('job', 'submit', CODE, 'greet');
      expect(r.code).toBe(2);
      expect(r.err).toContain('job submit needs an account: --pds <url> --identifier <handle|did> --password');
    });

    it('serve --jobs says it needs the runner account, and --jobs-from needs --jobs', async () => {
      const r = await run('serve', '--jobs', '--home', '/nonexistent/runlog-job-cli');
      expect(r.code).toBe(2);
      expect(r.err).toContain('runlog serve --jobs (the runner account');
      expect(r.err).toContain('RUNLOG_PDS_URL, RUNLOG_IDENTIFIER, RUNLOG_PASSWORD');
      const from = await run('serve', '--jobs-from', 'https://relay.example', '--home', '/nonexistent/runlog-job-cli');
      expect(from.code).toBe(2);
      expect(from.err).toContain('give --jobs');
      const bad = await run('serve', '--jobs', '--jobs-from', 'relay.example', '--home', '/nonexistent/runlog-job-cli');
      expect(bad.code).toBe(2);
      expect(bad.err).toContain('--jobs-from must be an http(s) or ws(s) URL');
    });
  });
});

describe('job submit: writing the job and waiting for its answer', () => {
  it('writes the job record and prints its URI, CID and execution id', async () => {
    const { publisher, written } = fakePublisher();
    const c = capture();
    const code = await runJobSubmit(
      args(['submit', CODE, 'greet'], { input: '{"name":"Ada"}', runner: RUNNER }),
      c.factory(false),
      { publisher },
    );
    expect(code).toBe(0);
    expect(written[0]).toMatchObject({ code: CODE, handler: 'greet', input: { name: 'Ada' }, runner: RUNNER });
    const [uri, cid, executionId] = c.stdout().split('\n');
    expect(executionId).toBe(jobExecutionId(uri!, cid!));
    expect(c.stderr()).toContain(`at://${RUNNER}/${AT_RUN_V2.execution}/${executionId}`);
  });

  it('refuses a job record that is not valid before writing it', async () => {
    const { publisher, written } = fakePublisher();
    const c = capture();
    await expect(
      runJobSubmit(args(['submit', 'at://nobody/x/y', 'greet'], { runner: 'not-a-did' }), c.factory(false), {
        publisher,
      }),
    ).rejects.toMatchObject({ code: 'JOB_CODE_REF_INVALID' });
    expect(written).toEqual([]);
  });

  it('with --wait, prints the output of the receipt it read strictly, and exits 0', async () => {
    const { publisher } = fakePublisher();
    const { reader, reads, answer } = fakeReader({ receipt: (j) => receiptOf(j) });
    const c = capture();
    // The receipt answers the job the publisher writes (its strong ref).
    const pub = partial<Publisher>({
      putRecord: async (...a: Parameters<Publisher['putRecord']>) => {
        const ref = await publisher.putRecord(...a);
        answer(ref);
        return ref;
      },
    });
    const code = await runJobSubmit(
      args(['submit', CODE, 'greet'], { runner: RUNNER, wait: true, json: true }),
      c.factory(true),
      { publisher: pub, reader },
    );
    expect(code).toBe(0);
    const out = JSON.parse(c.stdout()) as Record<string, unknown>;
    expect(out).toMatchObject({ outcome: 'succeeded', output: { greeting: 'Hello, Ada!' } });
    expect(out.outputSha256).toBe(sha256Hex(resultBytes));
    expect(reads.every((r) => r.mode === 'strict')).toBe(true);
    expect(reads[0]!.uri).toBe(`at://${RUNNER}/${AT_RUN_V2.execution}/${out.executionId as string}`);
  });

  it("exits with a failed job's failure code's status (known code), else 1", async () => {
    const cases: [Record<string, unknown>, number, string][] = [
      [{ kind: 'validation', code: 'HANDLER_NOT_FOUND', message: 'no handler greet' }, 2, 'HANDLER_NOT_FOUND'],
      [{ kind: 'validation', code: 'JOB_EXPIRED', message: 'its notAfter has passed' }, 1, 'JOB_EXPIRED'],
      [{ kind: 'runtime', code: 'TypeError', message: 'boom' }, 1, 'TypeError'],
    ];
    for (const [failure, status, shown] of cases) {
      const p = fakePublisher();
      const { reader, answer } = fakeReader({
        receipt: (j) => receiptOf(j, { outcome: 'failed', failure, outputSha256: undefined, result: undefined }),
      });
      const pub = partial<Publisher>({
        putRecord: async (...a: Parameters<Publisher['putRecord']>) => {
          const ref = await p.publisher.putRecord(...a);
          answer(ref);
          return ref;
        },
      });
      const c = capture();
      const code = await runJobSubmit(
        args(['submit', CODE, 'greet'], { runner: RUNNER, wait: true }),
        c.factory(false),
        {
          publisher: pub,
          reader,
        },
      );
      expect(code, shown).toBe(status);
      expect(c.stdout()).toBe('');
      expect(c.stderr()).toContain(`: ${shown}: ${failure.message as string}`);
    }
  });
});

describe('awaitJobAnswer', () => {
  const clock = () => {
    let now = 0;
    const slept: number[] = [];
    return {
      slept,
      nowMs: () => now,
      sleep: async (ms: number) => {
        slept.push(ms);
        now += ms;
      },
    };
  };

  it('polls the known receipt URI with a bounded backoff until the receipt appears', async () => {
    const t = clock();
    const { reader, reads } = fakeReader({ receipt: (j) => receiptOf(j), missing: 6 });
    const answer = await awaitJobAnswer(reader, job, { runnerDid: RUNNER, timeoutMs: 60_000, ...t });
    expect(answer).toMatchObject({ outcome: 'succeeded', output: { greeting: 'Hello, Ada!' } });
    expect(t.slept).toEqual([250, 500, 1000, 2000, 2000, 2000]);
    expect(new Set(reads.map((r) => r.uri))).toEqual(new Set([receiptUriOf(RUNNER, job)]));
  });

  it('fails with TIMEOUT when no receipt appears in time', async () => {
    const t = clock();
    const { reader } = fakeReader({ receipt: (j) => receiptOf(j), missing: 1_000 });
    await expect(awaitJobAnswer(reader, job, { runnerDid: RUNNER, timeoutMs: 3000, ...t })).rejects.toMatchObject({
      code: 'TIMEOUT',
    });
    expect(t.nowMs()).toBe(3000);
  });

  it('refuses a receipt whose proof fails at once, without waiting it out', async () => {
    const t = clock();
    const reader = partial<AtprotoReader>({
      fetchRecord: async () => {
        throw new AtprotoError('RECORD_PROOF_INVALID', 'the proof does not lead to the signed commit');
      },
    });
    await expect(awaitJobAnswer(reader, job, { runnerDid: RUNNER, timeoutMs: 60_000, ...t })).rejects.toMatchObject({
      code: 'RECORD_PROOF_INVALID',
    });
    expect(t.slept).toEqual([]);
  });

  it('refuses a result whose bytes do not hash to outputSha256, a receipt for another job, and one without a result', async () => {
    const t = { runnerDid: RUNNER, timeoutMs: 60_000, ...clock() };
    const tampered = fakeReader({ receipt: (j) => receiptOf(j, { outputSha256: 'f'.repeat(64) }) });
    await expect(awaitJobAnswer(tampered.reader, job, t)).rejects.toMatchObject({ code: 'RESULT_HASH_MISMATCH' });
    const other = fakeReader({ receipt: () => receiptOf({ uri: job.uri, cid: cidForRecordJson({ other: 1 }) }) });
    await expect(awaitJobAnswer(other.reader, job, t)).rejects.toMatchObject({ code: 'RECORD_INVALID' });
    const none = fakeReader({ receipt: (j) => receiptOf(j, { result: undefined }) });
    await expect(awaitJobAnswer(none.reader, job, t)).rejects.toMatchObject({ code: 'RESULT_MISSING' });
  });
});
