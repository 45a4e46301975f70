// Jobs taken from the network: the job records the repo event stream names are fetched with their proof, checked,
// and recorded as executions keyed by the record (decision 11), so each runs once whatever the stream replays.
//
// The stream only says where to look; the record is read from its author's PDS and verified as a code record is.
// A job is recorded as its execution's first event under an id derived from the job (jobExecutionId): one seen
// again (a replay, a restart, another node) finds its execution in the log and is skipped. A job this runner
// refuses is recorded too, as an execution that is answered with a receipt and never resolved. A job for another
// runner is not ours, and leaves no trace.
//
// Jobs are fetched a few at a time (up to `lookahead`, each with its existence check) but recorded one at a time,
// in the stream's order (ordered-pipeline.ts): the fetch is the slow part, and recording in order keeps the log,
// the counters and the rate limiter's decisions what they would be one job after the other. A job is recorded only
// while fewer than the policy's maxRunning of them are in flight, and the stream is not read while `lookahead` jobs
// wait: the stream client's bounded buffer fills and it stops reading too, so a burst waits in the relay rather
// than in memory. The cursor is recorded in the log behind the jobs (every cursorEveryMs, and when the intake
// closes): a message counts once every job in it is recorded, and the cursor never passes a job fetched but not
// yet recorded. After a restart the intake resumes from it, and what it reads again is skipped by the check above.
import { jobCreatesOf, type CreatedRecord, type RepoStream } from '../../adapters/atproto/index.ts';
import { jobExecutionId } from '../../adapters/ids.ts';
import { jobAdmission, validateJobRecord, type JobRecord } from '../../domain/at-run/job-record.ts';
import type { JobRate } from '../../domain/at-run/job-rate.ts';
import type { OperatorPolicy } from '../../domain/at-run/operator-policy.ts';
import { RunlogError } from '../../domain/errors.ts';
import type { ExecutionRequest, Refusal } from '../../domain/execution-events.ts';
import { OrderedPipeline } from './ordered-pipeline.ts';

/** How often the cursor is recorded while the stream moves (and once more when the intake closes). */
const CURSOR_EVERY_MS = 60_000;
/** Jobs read ahead of the one being recorded, their records fetched side by side: the fetch is the slow part. */
export const JOB_LOOKAHEAD = 8;

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
  /** Jobs read ahead and fetched side by side, the one being recorded included (default JOB_LOOKAHEAD). */
  lookahead?: number;
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

/** A job read from the stream and not yet recorded. */
interface Pending {
  created: CreatedRecord;
  executionId: string;
  /** The cursor to record while this job is not: the last message whose jobs were all read before it. */
  before: number | undefined;
  /** The same job read earlier and not yet recorded when this one was read (a replay within the lookahead). */
  earlier: Pending | undefined;
  /** Whether, once its turn came, its execution is in the log (recorded here, or found there). */
  logged: boolean;
}

/** What is known of a job before its turn: in the log already, or its record as fetched (or why not). */
type Fetched =
  { kind: 'seen' } | { kind: 'read'; value: unknown } | { kind: 'unread'; error: unknown } | { kind: 'closing' };

export class JobIntake {
  readonly counters: JobIntakeCounters = { taken: 0, refused: 0, ignored: 0, seenBefore: 0, gone: 0 };
  private stream: RepoStream | null = null;
  /** The last message read whose jobs are all in the pipeline. */
  private lastRead: number | undefined;
  private seen: number | undefined;
  private saved: number | undefined;
  private savedAt = 0;
  private saving: Promise<void> = Promise.resolve();
  private closing = false;
  private running: Promise<void> | null = null;
  /** The jobs in the pipeline by execution id, the latest read of each. */
  private readonly pendingIds = new Map<string, Pending>();
  private readonly pipeline: OrderedPipeline<Pending, Fetched>;

  constructor(private readonly deps: JobIntakeDeps) {
    this.pipeline = new OrderedPipeline<Pending, Fetched>({
      limit: deps.lookahead ?? JOB_LOOKAHEAD,
      prepare: (job) => this.fetch(job),
      commit: (job, fetched) => this.commit(job, fetched),
      committed: () => this.advance(),
      failed: (err) => {
        this.stopped(err);
        void this.stream?.close().catch(() => undefined); // ends the read: nothing more is taken
      },
    });
  }

  /** Starts following the stream from the recorded cursor; resolves once the stream is open. */
  async start(): Promise<void> {
    this.saved = this.seen = this.lastRead = await this.deps.cursor.read();
    this.savedAt = this.deps.nowMs();
    this.stream = this.deps.open(this.saved);
    this.running = this.follow(this.stream).catch((err: unknown) => {
      this.stopped(err);
      return this.pipeline.stop(); // the jobs read ahead are not recorded: the cursor stays behind them
    });
  }

  /** The last stream position the intake has taken everything up to. */
  get cursor(): number | undefined {
    return this.seen;
  }

  /** Stops reading, abandons the jobs read ahead and not recorded, and records the cursor of what was taken. */
  async close(): Promise<void> {
    this.closing = true;
    const stopping = this.pipeline.stop(); // at once: no job is recorded from here on but the one under way
    await this.stream?.close();
    await stopping;
    await this.running;
    await this.saveCursor(true);
  }

  private stopped(err: unknown): void {
    if (!this.closing) this.deps.log(`job intake stopped: ${err instanceof Error ? err.message : String(err)}`);
  }

  private async follow(stream: RepoStream): Promise<void> {
    for await (const message of stream) {
      if (this.closing || !this.pipeline.open) return;
      // Started at the stream's live end (no cursor recorded yet): where it started is recorded before any job is
      // taken, or a supervisor killed before its first periodic record would start at the live end again, past them.
      if (this.saved === undefined && 'seq' in message) await this.serially(() => this.recordCursor(message.seq - 1));
      for (const created of jobCreatesOf(message)) {
        if (this.closing || !(await this.pipeline.push(this.pending(created)))) return;
      }
      if ('seq' in message) this.lastRead = message.seq; // an #info message has no position
      if (this.pipeline.size === 0) {
        this.seen = this.lastRead;
        await this.saveCursor(false);
      }
    }
    if (!this.closing) await this.pipeline.drain();
  }

  private pending(created: CreatedRecord): Pending {
    const executionId = jobExecutionId(created.uri, created.cid);
    const job: Pending = {
      created,
      executionId,
      before: this.lastRead,
      earlier: this.pendingIds.get(executionId),
      logged: false,
    };
    this.pendingIds.set(executionId, job);
    return job;
  }

  /** After a job is recorded: the cursor moves up to the next job not recorded, or to the last message read. */
  private async advance(): Promise<void> {
    const head = this.pipeline.head();
    this.seen = head ? head.before : this.lastRead;
    await this.saveCursor(false);
  }

  /** Records the cursor when it moved and is due (or `now`), then lets the stream resume after it. */
  private saveCursor(now: boolean): Promise<void> {
    return this.serially(async () => {
      const seq = this.seen;
      if (seq === undefined || seq === this.saved) return;
      if (!now && this.deps.nowMs() - this.savedAt < (this.deps.cursorEveryMs ?? CURSOR_EVERY_MS)) return;
      await this.recordCursor(seq);
    });
  }

  /** Runs cursor records one after the other: the reader and the recorder both move the cursor. */
  private serially(write: () => Promise<void>): Promise<void> {
    const next = this.saving.then(write);
    this.saving = next.catch(() => undefined);
    return next;
  }

  private async recordCursor(seq: number): Promise<void> {
    await this.deps.cursor.write(seq);
    this.saved = seq;
    this.savedAt = this.deps.nowMs();
    this.stream?.ack(seq);
  }

  /** Waits while the policy's maxRunning jobs are in flight: the lookahead fills, and the stream is not read. */
  private async room(): Promise<void> {
    while (!this.closing && this.deps.inFlight() >= this.deps.policy.executions.maxRunning) await this.deps.ended();
  }

  /** Beside the other jobs read ahead: whether the job is in the log already, and if not its record, fetched. */
  private async fetch(job: Pending): Promise<Fetched> {
    const { created } = job;
    if (await this.deps.exists(job.executionId)) return { kind: 'seen' };
    if (this.closing) return { kind: 'closing' };
    try {
      return { kind: 'read', value: (await this.deps.fetch(created.uri, created.cid)).value };
    } catch (error) {
      return { kind: 'unread', error };
    }
  }

  /** In the stream's order, once the job's fetch is done: records it (or its refusal); false when closing. */
  private async commit(job: Pending, fetched: Fetched): Promise<boolean> {
    if (this.closing || fetched.kind === 'closing') return false;
    // A replay within the lookahead was checked before the first was recorded: the first one's outcome answers.
    if (fetched.kind === 'seen' || job.earlier?.logged) {
      this.counters.seenBefore++;
      job.logged = true;
    } else {
      await this.room();
      if (this.closing) return false;
      job.logged = await this.take(job.created, job.executionId, fetched);
    }
    // Only now: a replay read from here on is checked against the log, which has this job's outcome.
    if (this.pendingIds.get(job.executionId) === job) this.pendingIds.delete(job.executionId);
    job.earlier = undefined;
    return true;
  }

  /** Checks a job's record and records its execution, or its refusal; whether its execution is in the log now. */
  private async take(
    created: CreatedRecord,
    executionId: string,
    fetched: Exclude<Fetched, { kind: 'seen' | 'closing' }>,
  ): Promise<boolean> {
    const { deps } = this;
    const base = {
      executionId,
      callerDid: created.repo,
      timeoutMs: deps.policy.defaults.timeoutMs,
      job: { uri: created.uri, cid: created.cid },
    };
    const unread = { ...base, uri: created.uri, handler: '-', input: null };
    if (fetched.kind === 'unread') {
      const err = fetched.error;
      const code = err instanceof RunlogError ? err.code : 'INTERNAL';
      if (code === 'RECORD_NOT_FOUND') {
        this.counters.gone++;
        return false;
      }
      const message = `the job record ${created.uri} could not be verified: ${err instanceof Error ? err.message : String(err)}`;
      return this.answer(unread, { code: UNVERIFIED.has(code) ? 'JOB_UNVERIFIED' : 'JOB_UNREADABLE', message });
    }
    const check = validateJobRecord(fetched.value, deps.policy);
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
      return false;
    }
    if (admission.kind === 'refuse') return this.answer(request, admission);
    const rate = deps.rate.take(created.repo);
    if (!rate.allow) return this.answer(request, rate);
    if ((await deps.record(request)) === 'exists') this.counters.seenBefore++;
    else this.counters.taken++;
    return true;
  }

  /** Records a refused job: its execution answers it with a receipt and ends failed, never resolved. */
  private async answer(request: ExecutionRequest, refused: Refusal): Promise<boolean> {
    const outcome = await this.deps.record(request, { code: refused.code, message: refused.message });
    if (outcome === 'exists') this.counters.seenBefore++;
    else this.counters.refused++;
    return true;
  }
}
