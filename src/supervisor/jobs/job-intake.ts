// Jobs taken from the network: the job records the repo event stream names are fetched with their proof, checked,
// and recorded as executions keyed by the record (decision 11), so each runs once whatever the stream replays.
//
// The stream only says where to look; the record is read from its author's PDS and verified as a code record is.
// A job is recorded as its execution's first event under an id derived from the job (jobExecutionId): one seen
// again (a replay, a restart, another node) finds its execution in the log and is skipped. A job this runner
// refuses is recorded too, as an execution that is answered with a receipt and never resolved. A job for another
// runner is not ours, and leaves no trace.
//
// Jobs are taken one at a time, in the stream's order, and only while fewer than the policy's maxRunning of them
// are in flight: otherwise the intake stops reading, the stream client's bounded buffer fills and it stops
// reading too, so a burst waits in the relay rather than in memory. The cursor is recorded in the log behind the
// jobs (every cursorEveryMs, and when the intake closes); after a restart the intake resumes from it, and what it
// reads again is skipped by the check above.
import { jobCreatesOf, type CreatedRecord, type RepoStream } from '../../adapters/atproto/index.ts';
import { jobExecutionId } from '../../adapters/ids.ts';
import { jobAdmission, validateJobRecord, type JobRecord } from '../../domain/at-run/job-record.ts';
import type { JobRate } from '../../domain/at-run/job-rate.ts';
import type { OperatorPolicy } from '../../domain/at-run/operator-policy.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { ExecutionRequest, Refusal } from '../../domain/execution-events.ts';

/** How often the cursor is recorded while the stream moves (and once more when the intake closes). */
const CURSOR_EVERY_MS = 60_000;

/** Read failures that say the record is not what the stream named, or not signed by its repo: a forged job. */
const UNVERIFIED = new Set([
  'RECORD_SIGNATURE_INVALID',
  'RECORD_PROOF_INVALID',
  'RECORD_CID_MISMATCH',
  'RECORD_INVALID',
  'RECORD_TOO_LARGE',
]);

export interface JobIntakeDeps {
  /** This runner's DID (its runner record's repo): jobs addressed to another DID are not ours. */
  runnerDid: string;
  policy: Pick<OperatorPolicy, 'jobs' | 'input' | 'defaults' | 'executions'>;
  /** Opens the repo event stream after `cursor` (absent: at its live end). */
  open(cursor: number | undefined): RepoStream;
  /** Fetches a record with its proof (strict mode), refusing one whose CID is not `cid`. */
  fetch(uri: string, cid: string): Promise<{ value: unknown }>;
  /** Whether the execution is in the log already (taken before: here, earlier, or by another node). */
  exists(executionId: string): Promise<boolean>;
  /** Records the execution's first event; 'exists' when another append of the same id came first. */
  record(request: ExecutionRequest, refused?: Refusal): Promise<'recorded' | 'exists'>;
  /** Jobs' executions recorded here that have not ended. */
  inFlight(): number;
  /** Resolves when a job's execution ended (inFlight() dropped), or after a while to look again. */
  ended(): Promise<void>;
  cursor: { read(): Promise<number | undefined>; write(seq: number): Promise<void> };
  rate: JobRate;
  nowMs(): number;
  log(msg: string): void;
  cursorEveryMs?: number;
}

/** What the intake has done since it started (metrics and tests read it). */
export interface JobIntakeCounters {
  taken: number;
  refused: number;
  ignored: number;
  /** Jobs whose execution was already in the log. */
  seenBefore: number;
  /** Creates the stream named whose record was gone when fetched (deleted meanwhile). */
  gone: number;
}

export class JobIntake {
  readonly counters: JobIntakeCounters = { taken: 0, refused: 0, ignored: 0, seenBefore: 0, gone: 0 };
  private stream: RepoStream | null = null;
  private seen: number | undefined;
  private saved: number | undefined;
  private savedAt = 0;
  private closing = false;
  private running: Promise<void> | null = null;

  constructor(private readonly deps: JobIntakeDeps) {}

  /** Starts following the stream from the recorded cursor; resolves once the stream is open. */
  async start(): Promise<void> {
    this.saved = this.seen = await this.deps.cursor.read();
    this.savedAt = this.deps.nowMs();
    this.stream = this.deps.open(this.saved);
    this.running = this.follow(this.stream).catch((err: unknown) => {
      if (!this.closing) this.deps.log(`job intake stopped: ${err instanceof Error ? err.message : String(err)}`);
    });
  }

  /** The last stream position the intake has taken everything up to. */
  get cursor(): number | undefined {
    return this.seen;
  }

  /** Stops reading, and records the cursor of what was taken. */
  async close(): Promise<void> {
    this.closing = true;
    await this.stream?.close();
    await this.running;
    await this.saveCursor(true);
  }

  private async follow(stream: RepoStream): Promise<void> {
    for await (const message of stream) {
      if (this.closing) return;
      // Started at the stream's live end (no cursor recorded yet): where it started is recorded before any job is
      // taken, or a supervisor killed before its first periodic record would start at the live end again, past them.
      if (this.saved === undefined && 'seq' in message) await this.recordCursor(message.seq - 1);
      for (const created of jobCreatesOf(message)) {
        if (this.closing) return;
        await this.take(created);
      }
      if ('seq' in message) this.seen = message.seq; // an #info message has no position
      await this.saveCursor(false);
    }
  }

  /** Records the cursor when it moved and is due (or `now`), then lets the stream resume after it. */
  private async saveCursor(now: boolean): Promise<void> {
    const seq = this.seen;
    if (seq === undefined || seq === this.saved) return;
    if (!now && this.deps.nowMs() - this.savedAt < (this.deps.cursorEveryMs ?? CURSOR_EVERY_MS)) return;
    await this.recordCursor(seq);
  }

  private async recordCursor(seq: number): Promise<void> {
    await this.deps.cursor.write(seq);
    this.saved = seq;
    this.savedAt = this.deps.nowMs();
    this.stream?.ack(seq);
  }

  /** Waits while the policy's maxRunning jobs are in flight: the stream is not read meanwhile. */
  private async room(): Promise<void> {
    while (!this.closing && this.deps.inFlight() >= this.deps.policy.executions.maxRunning) await this.deps.ended();
  }

  private async take(created: CreatedRecord): Promise<void> {
    const { deps } = this;
    const executionId = jobExecutionId(created.uri, created.cid);
    if (await deps.exists(executionId)) {
      this.counters.seenBefore++;
      return;
    }
    await this.room();
    if (this.closing) return;
    const base = {
      executionId,
      callerDid: created.repo,
      timeoutMs: deps.policy.defaults.timeoutMs,
      job: { uri: created.uri, cid: created.cid },
    };
    const unread = { ...base, uri: created.uri, handler: '-', input: null };
    let value: unknown;
    try {
      ({ value } = await deps.fetch(created.uri, created.cid));
    } catch (err) {
      const code = err instanceof RunlogError ? err.code : 'INTERNAL';
      if (code === 'RECORD_NOT_FOUND') {
        this.counters.gone++;
        return;
      }
      const message = `the job record ${created.uri} could not be verified: ${err instanceof Error ? err.message : String(err)}`;
      return this.answer(unread, { code: UNVERIFIED.has(code) ? 'JOB_UNVERIFIED' : 'JOB_UNREADABLE', message });
    }
    const check = validateJobRecord(value, deps.policy);
    if (!check.ok || !check.record) {
      const first = check.violations[0];
      const message = check.violations.map((v) => v.message).join('; ');
      return this.answer(unread, { code: first?.code ?? 'JOB_RECORD_INVALID', message });
    }
    const job: JobRecord = check.record;
    const request: ExecutionRequest = {
      ...base,
      uri: job.code,
      handler: job.handler,
      input: job.input ?? null,
      job: {
        ...base.job,
        ...(job.codeCid ? { codeCid: job.codeCid } : {}),
        // The reference only: the values are opened at resolve (a check) and at invoke (the envelope).
        ...(job.secrets ? { secrets: { uri: job.secrets.uri, cid: job.secrets.cid } } : {}),
        // A public key: the result is sealed to it when the receipt is written.
        ...(job.resultKey ? { resultKey: job.resultKey } : {}),
      },
    };
    const admission = jobAdmission(job, { runnerDid: deps.runnerDid, policy: deps.policy, now: deps.nowMs() });
    if (admission.kind === 'ignore') {
      this.counters.ignored++;
      return;
    }
    if (admission.kind === 'refuse') return this.answer(request, admission);
    const rate = deps.rate.take(created.repo);
    if (!rate.allow) return this.answer(request, rate);
    if ((await deps.record(request)) === 'exists') this.counters.seenBefore++;
    else this.counters.taken++;
  }

  /** Records a refused job: its execution answers it with a receipt and ends failed, never resolved. */
  private async answer(request: ExecutionRequest, refused: Refusal): Promise<void> {
    const outcome = await this.deps.record(request, { code: refused.code, message: refused.message });
    if (outcome === 'exists') this.counters.seenBefore++;
    else this.counters.refused++;
  }
}
