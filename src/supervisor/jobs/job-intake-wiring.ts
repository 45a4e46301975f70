// The job intake's parts, from the supervisor's: the repo event stream of the configured service, the verified
// reader, the actor host that records each job's execution, and the fact stream that keeps the cursor.
import { openRepoStream, type AtprotoReader } from '../../adapters/atproto/index.ts';
import { JobRate } from '../../domain/at-run/job-rate.ts';
import type { OperatorPolicy } from '../../domain/at-run/operator-policy.ts';
import type { Clock } from '../../domain/clock.ts';
import { RunlogError } from '../../domain/errors.ts';
import { streamName } from '../../domain/events.ts';
import type { EventStorePort } from '../../store/port.ts';
import { collect } from '../../store/port.ts';
import type { ActorHost } from '../host/actor-host.ts';
import type { Bus } from '../host/bus.ts';
import { JobIntake } from './job-intake.ts';

/** How long a job record's read (DID document, record and proof) may take before the job is refused. */
const FETCH_MS = 30_000;
/** The stream client's buffer: messages read ahead of the intake, at most the policy's queue bound. */
const READ_AHEAD = 256;
/** How long the intake waits for a job's execution to end before it looks at the count again. */
const RECHECK_MS = 1000;

/** Where a supervisor takes jobs from (RunlogOptions.jobs). */
export interface JobsOptions {
  /** The relay or PDS whose repo event stream is followed (http(s) or ws(s)). */
  from: string;
  /** How often the stream's cursor is recorded while it moves (default one minute). */
  cursorEveryMs?: number;
}

export interface JobIntakeParts {
  options: JobsOptions;
  runnerDid: string;
  /** This node's name: each node keeps its own cursor. */
  node: string;
  policy: OperatorPolicy;
  reader: AtprotoReader;
  host: ActorHost;
  store: EventStorePort;
  bus: Bus;
  clock: Clock;
  log: (msg: string) => void;
}

/** The fact stream holding a node's cursor in the repo event stream. */
export const jobCursorStream = (node: string): string => `job-intake-${node}`;

/** A started intake, and how to stop it (its cursor recorded, its listener gone). */
export interface JobIntakeHandle {
  intake: JobIntake;
  close(): Promise<void>;
}

/** Builds the intake and starts it from the cursor its node recorded. */
export async function startJobIntake(p: JobIntakeParts): Promise<JobIntakeHandle> {
  const { host, store, clock, policy } = p;
  const cursorStream = jobCursorStream(p.node);
  // The executions this intake recorded that have not ended: its measure of what is in flight.
  const flying = new Set<string>();
  let wake: (() => void) | null = null;
  const off = p.bus.on('execution:finished', ({ executionId }) => {
    if (flying.delete(executionId)) wake?.();
  });
  const intake = new JobIntake({
    runnerDid: p.runnerDid,
    policy,
    open: (cursor) =>
      openRepoStream({
        service: p.options.from,
        ...(cursor !== undefined ? { cursor } : {}),
        bufferSize: Math.min(READ_AHEAD, policy.jobs.maxQueued),
      }),
    fetch: (uri, cid) =>
      p.reader.fetchRecord(uri, { mode: 'strict', expectCid: cid, deadlineAt: clock.nowMs() + FETCH_MS }),
    exists: async (id) => (await store.streamVersion(streamName('execution', id))) > 0,
    record: async (request, refused) => {
      try {
        await host.create('execution', request.executionId, {
          type: 'execution.requested',
          data: {
            request,
            deadline: new Date(clock.nowMs() + request.timeoutMs + 120_000).toISOString(),
            ...(refused ? { refused } : {}),
          },
        });
      } catch (err) {
        if (err instanceof RunlogError && (err.code === 'ACTOR_EXISTS' || err.code === 'CONCURRENCY')) return 'exists';
        throw err;
      }
      if (!refused) flying.add(request.executionId);
      return 'recorded';
    },
    inFlight: () => flying.size,
    ended: () =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(done, RECHECK_MS);
        function done() {
          clearTimeout(timer);
          wake = null;
          resolve();
        }
        wake = done;
      }),
    cursor: {
      read: async () => {
        const version = await store.streamVersion(cursorStream);
        if (version === 0) return undefined;
        const [last] = await collect(store.readStream(cursorStream, { from: version }));
        const seq = (last?.data as { seq?: unknown } | undefined)?.seq;
        return typeof seq === 'number' ? seq : undefined;
      },
      write: async (seq) => {
        await host.appendFact(cursorStream, [{ type: 'jobs.cursor', data: { seq } }]);
      },
    },
    rate: new JobRate(policy.jobs, () => clock.nowMs()),
    nowMs: () => clock.nowMs(),
    log: p.log,
    ...(p.options.cursorEveryMs !== undefined ? { cursorEveryMs: p.options.cursorEveryMs } : {}),
  });
  await intake.start();
  return {
    intake,
    close: async () => {
      await intake.close();
      off();
      wake?.();
    },
  };
}
