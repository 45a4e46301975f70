// `runlog job submit` and `runlog serve --jobs` in process, with fakes for the network: the arguments and their
// usage errors, the receipt awaited by polling (strict reads, a bounded backoff, TIMEOUT), its result opened with
// the key --wait made (sealed by default) and checked against outputSha256, and a failed job's exit status taken
// from its failure code. (Against a real PDS and runner: test/int/executions/job-submit.test.ts.)
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
import { SEALED_RESULT_MIME_TYPE, sealResult } from '../../../src/domain/at-run/sealed-result.ts';
import { X25519PrivateKey } from '../../../src/domain/at-run/x25519-keys.ts';
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

/** A receipt whose result is `bytes` sealed to `resultKey` for the job `answers`; outputSha256 hashes the envelope. */
function sealedReceiptOf(answers: { uri: string; cid: string }, resultKey: string, bytes = resultBytes) {
  const blob = sealResult(bytes, resultKey, answers);
  const result = {
    $type: 'blob',
    ref: { $link: cidForBlobBytes(blob) },
    mimeType: SEALED_RESULT_MIME_TYPE,
    size: blob.byteLength,
  };
  return { blob, receipt: receiptOf(answers, { outputSha256: sha256Hex(blob), result }) };
}

/** A reader on which the receipt appears after `missing` reads, and the blob store holds `blob` (by default the result). */
function fakeReader(opts: {
  receipt: (j: { uri: string; cid: string }) => JsonObject;
  missing?: number;
  blob?: Uint8Array | (() => Uint8Array);
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
      const bytes = typeof opts.blob === 'function' ? opts.blob() : (opts.blob ?? resultBytes);
      expect(cid).toBe(cidForBlobBytes(bytes));
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
      sealResult: true,
    });
    expect(parseJobSubmit(args(['submit', CODE, 'greet']))).toEqual({ submission: { code: CODE, handler: 'greet' } });
    expect(parseJobSubmit(args(['submit', CODE, 'greet'], { runner: RUNNER, wait: true })).waitMs).toBe(120_000);
  });

  it('seals the result by default with --wait; --no-seal-result asks for it in clear; --result-key names a key', () => {
    const wait = { runner: RUNNER, wait: true };
    expect(parseJobSubmit(args(['submit', CODE, 'greet'], wait)).sealResult).toBe(true);
    const clear = parseJobSubmit(args(['submit', CODE, 'greet'], { ...wait, 'no-seal-result': true }));
    expect(clear).toEqual({ submission: { code: CODE, handler: 'greet', runner: RUNNER }, waitMs: 120_000 });
    const key = X25519PrivateKey.generate().publicKey;
    expect(parseJobSubmit(args(['submit', CODE, 'greet'], { 'result-key': key }))).toEqual({
      submission: { code: CODE, handler: 'greet', resultKey: key },
    });
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
      [['job', 'submit', CODE, 'greet', '--runner', RUNNER, '--no-seal-result'], /--no-seal-result .* give --wait/],
      [
        ['job', 'submit', CODE, 'greet', '--runner', RUNNER, '--wait', '--result-key', 'did:key:z6LS'],
        /--result-key is for a caller that opens the result itself/,
      ],
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

    it('serve --egress-resolver takes IPv4 resolvers the proxy can reach, and says so of a loopback or a name', async () => {
      for (const given of ['127.0.0.53', 'dns.example', '10.0.0.2,::1', ''])
        expect((await run('serve', '--egress-resolver', given, '--home', '/nonexistent/runlog-job-cli')).err).toContain(
          '--egress-resolver must be IPv4 addresses',
        );
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

  it('with --wait, asks for the result sealed to a fresh key, opens the receipt it read strictly, and exits 0', async () => {
    const { publisher, written } = fakePublisher();
    // The runner's side: the receipt answers the job the publisher writes, its result sealed to the job's resultKey.
    let sealed: ReturnType<typeof sealedReceiptOf> | undefined;
    const { reader, reads } = fakeReader({ receipt: () => sealed!.receipt, blob: () => sealed!.blob });
    const pub = partial<Publisher>({
      putRecord: async (...a: Parameters<Publisher['putRecord']>) => {
        const ref = await publisher.putRecord(...a);
        sealed = sealedReceiptOf(ref, String(written[0]!.resultKey));
        return ref;
      },
    });
    const c = capture();
    const code = await runJobSubmit(
      args(['submit', CODE, 'greet'], { runner: RUNNER, wait: true, json: true }),
      c.factory(true),
      { publisher: pub, reader },
    );
    expect(code, c.stderr()).toBe(0);
    expect(written[0]!.resultKey).toMatch(/^did:key:z6LS/);
    const out = JSON.parse(c.stdout()) as Record<string, unknown>;
    expect(out).toMatchObject({ outcome: 'succeeded', output: { greeting: 'Hello, Ada!' }, result: { sealed: true } });
    expect(out.outputSha256).toBe(sha256Hex(sealed!.blob));
    expect(reads.every((r) => r.mode === 'strict')).toBe(true);
    expect(reads[0]!.uri).toBe(`at://${RUNNER}/${AT_RUN_V2.execution}/${out.executionId as string}`);
  });

  it('makes a new key for every job, and says on stderr that the result is sealed', async () => {
    const keys: string[] = [];
    for (let i = 0; i < 2; i++) {
      const { publisher, written } = fakePublisher();
      let sealed: ReturnType<typeof sealedReceiptOf> | undefined;
      const { reader } = fakeReader({ receipt: () => sealed!.receipt, blob: () => sealed!.blob });
      const pub = partial<Publisher>({
        putRecord: async (...a: Parameters<Publisher['putRecord']>) => {
          const ref = await publisher.putRecord(...a);
          sealed = sealedReceiptOf(ref, String(written[0]!.resultKey));
          return ref;
        },
      });
      const c = capture();
      expect(
        await runJobSubmit(args(['submit', CODE, 'greet'], { runner: RUNNER, wait: true }), c.factory(false), {
          publisher: pub,
          reader,
        }),
      ).toBe(0);
      expect(JSON.parse(c.stdout())).toEqual({ greeting: 'Hello, Ada!' });
      expect(c.stderr()).toContain('its result sealed to a key only this command holds');
      keys.push(String(written[0]!.resultKey));
    }
    expect(keys[0]).not.toBe(keys[1]);
  });

  it('with --wait --no-seal-result, asks for and reads the result in clear', async () => {
    const { publisher, written } = fakePublisher();
    const { reader, answer } = fakeReader({ receipt: (j) => receiptOf(j) });
    const pub = partial<Publisher>({
      putRecord: async (...a: Parameters<Publisher['putRecord']>) => {
        const ref = await publisher.putRecord(...a);
        answer(ref);
        return ref;
      },
    });
    const c = capture();
    const code = await runJobSubmit(
      args(['submit', CODE, 'greet'], { runner: RUNNER, wait: true, 'no-seal-result': true, json: true }),
      c.factory(true),
      { publisher: pub, reader },
    );
    expect(code).toBe(0);
    expect(written[0]).not.toHaveProperty('resultKey');
    expect(JSON.parse(c.stdout())).toMatchObject({ output: { greeting: 'Hello, Ada!' }, result: { sealed: false } });
  });

  it('refuses, with RESULT_UNSEALABLE, a result in clear when it asked for it sealed', async () => {
    const { publisher } = fakePublisher();
    const { reader, answer } = fakeReader({ receipt: (j) => receiptOf(j) });
    const pub = partial<Publisher>({
      putRecord: async (...a: Parameters<Publisher['putRecord']>) => {
        const ref = await publisher.putRecord(...a);
        answer(ref);
        return ref;
      },
    });
    const c = capture();
    await expect(
      runJobSubmit(args(['submit', CODE, 'greet'], { runner: RUNNER, wait: true }), c.factory(false), {
        publisher: pub,
        reader,
      }),
    ).rejects.toMatchObject({ code: 'RESULT_UNSEALABLE', message: expect.stringContaining('in clear') });
    expect(c.stdout()).toBe('');
  });

  it('without --wait, writes the --result-key given, and refuses one that is not an X25519 did:key', async () => {
    const key = X25519PrivateKey.generate().publicKey;
    const { publisher, written } = fakePublisher();
    const c = capture();
    expect(
      await runJobSubmit(args(['submit', CODE, 'greet'], { 'result-key': key }), c.factory(false), { publisher }),
    ).toBe(0);
    expect(written[0]!.resultKey).toBe(key);
    await expect(
      runJobSubmit(args(['submit', CODE, 'greet'], { 'result-key': 'did:key:zNope' }), capture().factory(false), {
        publisher,
      }),
    ).rejects.toMatchObject({ code: 'JOB_RESULT_KEY_INVALID' });
    expect(written).toHaveLength(1);
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

  it('opens a sealed result with the key given, after checking the envelope against outputSha256', async () => {
    const key = X25519PrivateKey.generate();
    const t = { runnerDid: RUNNER, timeoutMs: 60_000, ...clock() };
    const s = sealedReceiptOf(job, key.publicKey);
    const ok = fakeReader({ receipt: () => s.receipt, blob: s.blob });
    const answer = await awaitJobAnswer(ok.reader, job, { ...t, resultKey: key });
    expect(answer).toMatchObject({
      outcome: 'succeeded',
      output: { greeting: 'Hello, Ada!' },
      result: { sealed: true },
    });
    expect(answer.outcome === 'succeeded' && answer.outputSha256).toBe(sha256Hex(s.blob));
    // The hash of the plaintext is never public: a receipt carrying it is refused, as any other wrong hash.
    const plainHash = fakeReader({
      receipt: () => ({ ...s.receipt, outputSha256: sha256Hex(resultBytes) }),
      blob: s.blob,
    });
    await expect(awaitJobAnswer(plainHash.reader, job, { ...t, resultKey: key })).rejects.toMatchObject({
      code: 'RESULT_HASH_MISMATCH',
    });
    const wrongHash = fakeReader({ receipt: () => ({ ...s.receipt, outputSha256: 'f'.repeat(64) }), blob: s.blob });
    await expect(awaitJobAnswer(wrongHash.reader, job, { ...t, resultKey: key })).rejects.toMatchObject({
      code: 'RESULT_HASH_MISMATCH',
    });
  });

  it('refuses a sealed result it cannot open: no key, another key, another job, altered bytes', async () => {
    const key = X25519PrivateKey.generate();
    const t = { runnerDid: RUNNER, timeoutMs: 60_000, ...clock() };
    const s = sealedReceiptOf(job, key.publicKey);
    const unsealable = async (receipt: JsonObject, blob: Uint8Array, resultKey?: X25519PrivateKey) => {
      const { reader } = fakeReader({ receipt: () => receipt, blob });
      const err = await awaitJobAnswer(reader, job, { ...t, ...(resultKey ? { resultKey } : {}) }).catch((e) => e);
      expect(err).toMatchObject({ code: 'RESULT_UNSEALABLE' });
      expect(JSON.stringify(err)).not.toContain('Hello, Ada!');
      return (err as Error).message;
    };
    expect(await unsealable(s.receipt, s.blob)).toContain('no key was given to open it');
    expect(await unsealable(s.receipt, s.blob, X25519PrivateKey.generate())).toContain('not to did:key:');
    // Sealed for another job, then put in this job's receipt.
    const moved = sealedReceiptOf({ uri: job.uri, cid: cidForRecordJson({ other: 1 }) }, key.publicKey);
    expect(await unsealable({ ...s.receipt, result: moved.receipt.result! }, moved.blob, key)).toContain(
      'fails authentication',
    );
    const envelope = JSON.parse(Buffer.from(s.blob).toString('utf8')) as Record<string, string>;
    const ct = Buffer.from(envelope.ct!, 'base64');
    ct[0] = ct[0]! ^ 1;
    const altered = Buffer.from(JSON.stringify({ ...envelope, ct: ct.toString('base64').replace(/=+$/, '') }));
    const alteredResult = { ...(s.receipt.result as JsonObject), ref: { $link: cidForBlobBytes(altered) } };
    expect(await unsealable({ ...s.receipt, result: alteredResult }, altered, key)).toContain('fails authentication');
  });
});
