// `runlog job submit`: writes a job record in the caller's repo (credentials as `publish`) and prints its URI, CID
// and execution id; with --wait, waits for the runner's receipt, checks its proof and its result, and prints the
// output, or the failure with the exit status of its code. With --wait the result is sealed by default to a fresh
// X25519 key this process holds in memory only (the job's resultKey is its public half), so the output is never on
// the network in clear: the key is made here, used once to open the answer, and never written or printed.
// Only light modules at the top (see command.ts): AT Protocol code loads when the command runs.
import { exitStatusOf, isErrorCode } from '../../domain/error-codes.ts';
import { UsageError } from '../../domain/errors.ts';
import type { AtprotoReader, JobAnswer, JobSubmission, Publisher } from '../../supervisor/jobs/job-submit.ts';
import type { Command, CommandArgs } from '../command.ts';
import { EXIT, printJson, type Io } from '../output.ts';
import { requestTimeout } from '../request-timeout.ts';
import { publishCommand, publisherFrom } from './publish-commands.ts';

/** How long --wait waits for the receipt unless --timeout says otherwise. */
const DEFAULT_WAIT_MS = 120_000;

/** What `job submit`'s command line asks for: the job, and whether (and how long) to wait for its answer. */
export interface JobSubmitRequest {
  submission: JobSubmission;
  /** Absent: print the job and return. */
  waitMs?: number;
  /** With waitMs: ask for the result sealed to a fresh key held in memory, and open it (unless --no-seal-result). */
  sealResult?: boolean;
}

/** A strong ref written `<at-uri>@<cid>` (the CID after the last '@'). */
function strongRefArg(flag: string, text: string): { uri: string; cid: string } {
  const at = text.lastIndexOf('@');
  if (at <= 0 || at === text.length - 1 || !text.startsWith('at://'))
    throw new UsageError(`--${flag} must be <at-uri>@<cid>, not '${text}'`);
  return { uri: text.slice(0, at), cid: text.slice(at + 1) };
}

/** Checks `job submit`'s arguments (UsageError for each mistake) and returns what they ask for. */
export function parseJobSubmit(args: CommandArgs): JobSubmitRequest {
  const [what, code, handler, ...rest] = args.positionals;
  if (what !== 'submit' || !code || !handler || rest.length > 0) throw new UsageError(`usage: ${jobCommand.usage}`);
  const v = args.values;
  let input: unknown;
  if (v.input !== undefined) {
    try {
      input = JSON.parse(String(v.input));
    } catch (err) {
      throw new UsageError(`--input is not JSON: ${(err as Error).message}`);
    }
  }
  const runner = v.runner as string | undefined;
  const notAfter = v['not-after'] as string | undefined;
  if (notAfter !== undefined && Number.isNaN(Date.parse(notAfter)))
    throw new UsageError(`--not-after must be an RFC 3339 datetime, not '${notAfter}'`);
  if (v.wait && !runner)
    throw new UsageError("--wait needs --runner <did>: the answer is a receipt in that runner's repo");
  if (v.timeout !== undefined && !v.wait) throw new UsageError('--timeout bounds --wait: give --wait too');
  if (v['no-seal-result'] && !v.wait)
    throw new UsageError('--no-seal-result turns off the sealing --wait does: give --wait too');
  const resultKey = v['result-key'] as string | undefined;
  if (resultKey !== undefined && v.wait)
    throw new UsageError(
      '--result-key is for a caller that opens the result itself; --wait seals it to a key of its own: give one or the other',
    );
  const submission: JobSubmission = {
    code,
    handler,
    ...(input !== undefined ? { input } : {}),
    ...(runner !== undefined ? { runner } : {}),
    ...(v['code-cid'] !== undefined ? { codeCid: String(v['code-cid']) } : {}),
    ...(v.secrets !== undefined ? { secrets: strongRefArg('secrets', String(v.secrets)) } : {}),
    ...(resultKey !== undefined ? { resultKey } : {}),
    ...(notAfter !== undefined ? { notAfter: new Date(notAfter).toISOString() } : {}),
  };
  if (!v.wait) return { submission };
  return {
    submission,
    waitMs: requestTimeout(args, DEFAULT_WAIT_MS),
    ...(v['no-seal-result'] ? {} : { sealResult: true }),
  };
}

/** The exit status of a job's answer: 0 when it succeeded, else its failure code's (error-codes.ts), else 1. */
export function exitStatusOfAnswer(answer: JobAnswer): number {
  if (answer.outcome === 'succeeded') return EXIT.ok;
  const code = answer.failure.code;
  return isErrorCode(code) ? exitStatusOf(code) : EXIT.failure;
}

/** What `job submit` needs besides its arguments; the defaults sign in with its flags and read the network. */
export interface JobSubmitDeps {
  publisher?: Publisher;
  reader?: AtprotoReader;
}

/**
 * `runlog job submit`'s work, for in-process use too: writes the job, prints it, and with --wait prints its
 * answer. Returns the exit status.
 */
export async function runJobSubmit(args: CommandArgs, io: Io, deps: JobSubmitDeps = {}): Promise<number> {
  const { submission, waitMs, sealResult } = parseJobSubmit(args);
  const publisher = deps.publisher ?? (await publisherFrom(args, 'job submit'));
  const [{ writeJob, awaitJobAnswer, callerReader, receiptUriOf }, { atprotoOptions }, { X25519PrivateKey }] =
    await Promise.all([
      import('../../supervisor/jobs/job-submit.ts'),
      import('../client.ts'),
      import('../../domain/at-run/x25519-keys.ts'),
    ]);
  // In memory only: the job carries its public half, and the private half opens the answer, then goes with the process.
  const resultKey = sealResult ? X25519PrivateKey.generate() : undefined;
  const job = await writeJob(publisher, resultKey ? { ...submission, resultKey: resultKey.publicKey } : submission);
  const runner = submission.runner;
  if (waitMs === undefined || runner === undefined) {
    if (io.json) printJson(io, { uri: job.uri, cid: job.cid, executionId: job.executionId });
    else io.out(`${job.uri}\n${job.cid}\n${job.executionId}`);
    if (runner && !io.json) io.err(`runlog: the runner answers at ${receiptUriOf(runner, job)}`);
    return EXIT.ok;
  }
  // With --json, stderr holds nothing but an error (one JSON object).
  if (!io.json)
    io.err(
      `runlog: submitted ${job.uri} (${job.executionId}); waiting for ${receiptUriOf(runner, job)}` +
        `${resultKey ? ' (its result sealed to a key only this command holds)' : ''}`,
    );
  const reader = deps.reader ?? callerReader(atprotoOptions(args.values.plc as string | undefined));
  const answer = await awaitJobAnswer(reader, job, {
    runnerDid: runner,
    timeoutMs: waitMs,
    ...(resultKey ? { resultKey } : {}),
  });
  if (io.json) printJson(io, { uri: job.uri, cid: job.cid, executionId: job.executionId, ...answer });
  else if (answer.outcome === 'succeeded') io.out(JSON.stringify(answer.output, null, 2));
  else
    io.err(
      `runlog: ${job.executionId} failed (${answer.failure.kind ?? 'unknown'}): ` +
        `${answer.failure.code ?? 'FAILED'}: ${answer.failure.message ?? ''}`,
    );
  return exitStatusOfAnswer(answer);
}

export const jobCommand: Command = {
  name: 'job',
  summary: "ask a runner on the network to run code: write a job record in your repo, and wait for the runner's answer",
  usage:
    "runlog job submit <code-uri> <handler> [--input '<json>'] [--runner <did>] [--code-cid <cid>] " +
    '[--secrets <at-uri>@<cid>] [--not-after <datetime>] ' +
    '[--wait [--timeout <ms>] [--no-seal-result] | --result-key <did:key>]   ' +
    '[--pds <url> --identifier <id> --password <pw>] [--plc <url>] [--json]',
  options: {
    input: { type: 'string', value: "'<json>'", description: "the handler's input, as JSON", defaultText: 'none' },
    runner: {
      type: 'string',
      value: '<did>',
      description: 'the runner asked to run it (needed for --wait)',
      defaultText: 'any runner that takes unaddressed jobs',
    },
    'code-cid': {
      type: 'string',
      value: '<cid>',
      description: 'the code record must have exactly this CID',
      defaultText: 'any version',
    },
    secrets: {
      type: 'string',
      value: '<at-uri>@<cid>',
      description: 'a secrets record sealed to the runner (runlog secrets seal prints its URI and CID)',
    },
    'not-after': {
      type: 'string',
      value: '<datetime>',
      description: 'the job must not start after this time (RFC 3339)',
      defaultText: 'no limit',
    },
    wait: {
      type: 'boolean',
      default: false,
      description:
        "wait for the runner's receipt (its proof and signature checked), open its result " +
        '(sealed to a fresh key this command holds in memory only), check it against its outputSha256, ' +
        "and print the output; a failed job exits with its failure code's status",
    },
    timeout: {
      type: 'string',
      value: '<ms>',
      description: 'with --wait: how long to wait for the answer; past it the command fails with TIMEOUT',
      defaultText: String(DEFAULT_WAIT_MS),
    },
    'no-seal-result': {
      type: 'boolean',
      default: false,
      description:
        "with --wait: ask for the result in clear, not sealed; it is then readable by anyone from the runner's PDS",
    },
    'result-key': {
      type: 'string',
      value: '<did:key>',
      description: 'without --wait: seal the result to this X25519 public key (did:key); only its holder can read it',
      defaultText: 'the result in clear (with --wait: sealed to a fresh key)',
    },
    pds: { ...publishCommand.options!.pds!, description: 'your PDS (the job is written in your repo)' },
    identifier: publishCommand.options!.identifier!,
    password: publishCommand.options!.password!,
    plc: {
      ...publishCommand.options!.plc!,
      description: "PLC directory (to verify the runner's receipt)",
    },
  },
  examples: [
    'runlog job submit at://did:plc:me/dev.mainasara.at-run.beta.v2.code/greet greet ' +
      '--input \'{"name":"Ada"}\' --runner did:plc:runner --wait',
  ],
  run: (args, io) => runJobSubmit(args, io),
};
