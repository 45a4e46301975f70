// stop, kill and logs of an instance another cluster node owns, handed over through the log (nodes need not know
// each other's addresses, only share the store — like placement.ts). The node that takes the call appends
// `handover.requested` to `placement-<owner>` and follows that stream; the node holding the instance's lease
// carries it out with its own local operation and appends `handover.answered` (the view's state, the log lines,
// or its typed error) to the same stream; the caller answers with it, HANDOVER_TIMEOUT when none came in time.
//
// Acted on at most once, never lost while its caller waits:
// - Only the instance's lease holder acts: the action is an event of the instance's stream (stop-requested,
//   kill-requested), appended under the lease (fenced), and carries the request's id in its meta. Before acting
//   the holder looks for that id in the instance's stream: found, the action was taken already (by it, or by the
//   previous owner before it died) and it only waits for it to settle and answers.
// - A node that lost the lease meanwhile is refused its append (FENCED) and does not answer: the new owner does.
// - The owner killed -9 with a request pending: the request stays in the log. The survivor that takes the
//   instance over (after the lease expired) first records what it knows (supervisor/cluster/takeover.ts: lost, or crashed and
//   restarted here), has read everything the dead owner committed (the PostgreSQL store catches up before a takeover),
//   then carries out every pending request for what it took: the dead owner's action, if it was appended, is
//   found by its id and not taken again.
// - A request past its deadline (its caller answered HANDOVER_TIMEOUT) is never acted on.
// A logs request acts on nothing: it is answered by whoever holds the lease, with its own host's lines.
import { randomUUID } from 'node:crypto';
import { FencedError, RunlogError } from '../../domain/errors.ts';
import type { RecordedEvent } from '../../domain/events.ts';
import {
  answerError,
  HANDOVER_ANSWERED,
  HANDOVER_REQUESTED,
  parseRequest,
  pendingRequests,
  type HandoverAction,
  type HandoverAnswer,
  type HandoverRequest,
} from '../../domain/handover.ts';
import type { EventStorePort, Subscription } from '../../store/port.ts';
import { placementStream } from './placement.ts';

/** How soon a request whose stream could not be read (the store unreachable) is looked at again. */
const STORE_RETRY_MS = 1000;

export interface HandoverDeps {
  store: Pick<EventStorePort, 'lastSeq' | 'listStreams' | 'readRecent' | 'subscribe'>;
  node: string;
  nowMs(): number;
  /** Whether this node holds the stream's lease now. */
  owns(stream: string): boolean;
  appendFact(stream: string, events: { type: string; data: Record<string, unknown> }[]): Promise<unknown>;
  /** Carries out the request here (the local stop/kill/logs); its events carry `meta.handover = requestId`. */
  act(request: HandoverRequest): Promise<Omit<HandoverAnswer, 'requestId' | 'by' | 'ok'>>;
  log(message: string): void;
}

export class Handover {
  private sub: Subscription | null = null;
  private stopped = false;
  private readonly handling = new Set<string>();
  /** Instances whose takeover is being recorded: their requests wait for tookOver(). */
  private readonly takingOver = new Set<string>();

  constructor(private readonly deps: HandoverDeps) {}

  /** Asks `owner` to carry it out; resolves with the answer, rejects with the owner's typed error or HANDOVER_TIMEOUT. */
  async ask(
    owner: string,
    action: HandoverAction,
    instanceId: string,
    graceMs: number | null,
    timeoutMs: number,
  ): Promise<HandoverAnswer> {
    const { store, node } = this.deps;
    const stream = placementStream(owner);
    const request: HandoverRequest = {
      requestId: randomUUID(),
      action,
      instanceId,
      graceMs,
      from: node,
      to: owner,
      deadline: new Date(this.deps.nowMs() + timeoutMs).toISOString(),
    };
    let done: (a: HandoverAnswer | Error) => void = () => undefined;
    const outcome = new Promise<HandoverAnswer | Error>((resolve) => (done = resolve));
    const timer = setTimeout(
      () =>
        done(
          new RunlogError(
            'HANDOVER_TIMEOUT',
            `node ${owner} did not answer ${action} of ${instanceId} within ${timeoutMs} ms (it is not acted on later)`,
            { id: instanceId, node: owner, action },
          ),
        ),
      timeoutMs,
    );
    let sub: Subscription | null = null;
    try {
      // Following from the log's head before the request is appended: no answer can be missed.
      const head = await store.lastSeq();
      sub = store.subscribe({ from: head + 1, stream }, (e) => {
        // why: answers are only ever appended by take() below with this shape
        if (
          e.stream === stream &&
          e.type === HANDOVER_ANSWERED &&
          (e.data as { requestId?: unknown }).requestId === request.requestId
        )
          done(e.data as unknown as HandoverAnswer);
      });
      await this.deps.appendFact(stream, [{ type: HANDOVER_REQUESTED, data: { ...request } }]);
      const a = await outcome;
      if (a instanceof Error) throw a;
      if (!a.ok) throw answerError(a, instanceId);
      return a;
    } finally {
      clearTimeout(timer);
      await sub?.close();
    }
  }

  /**
   * Follows the log: requests about instances this node holds the lease of are carried out (any node's stream).
   * Those up to the log's head are swept first, then the log is followed from the next position on. Resolves once
   * it follows.
   */
  async start(): Promise<void> {
    const { store } = this.deps;
    const head = await store.lastSeq();
    await this.sweepAll();
    if (this.stopped) return;
    this.sub = store.subscribe({ from: head + 1 }, (e) => {
      if (e.type !== HANDOVER_REQUESTED) return;
      const r = parseRequest(e.data);
      if (r) this.take(e.stream, r);
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const sub = this.sub;
    this.sub = null;
    await sub?.close();
  }

  /** Leases just taken over: their requests wait until what the survivor knows is recorded (tookOver). */
  taking(streams: readonly string[]): void {
    for (const s of streams) this.takingOver.add(s);
  }

  /** The takeover is recorded: pending requests for what was taken are carried out here now. */
  tookOver(streams: readonly string[]): void {
    for (const s of streams) this.takingOver.delete(s);
    void this.sweepAll().catch((err: unknown) =>
      this.deps.log(`hand-over requests for what was taken over: ${(err as Error).message}`),
    );
  }

  /** Carries out what every node's placement stream still asks of this node. */
  private async sweepAll(): Promise<void> {
    for (const s of await this.deps.store.listStreams('placement')) {
      for (const r of pendingRequests(await this.deps.store.readRecent(s.stream), this.deps.nowMs()))
        this.take(s.stream, r);
    }
  }

  private take(stream: string, r: HandoverRequest): void {
    const instance = `instance-${r.instanceId}`;
    if (this.handling.has(r.requestId) || this.takingOver.has(instance) || !this.deps.owns(instance)) return;
    if (!(Date.parse(r.deadline) > this.deps.nowMs())) return; // its caller has given up
    this.handling.add(r.requestId);
    void (async () => {
      try {
        // Answered meanwhile (by a previous owner that acted and answered before it lost the lease).
        let answered: boolean;
        try {
          answered = (await this.deps.store.readRecent(stream)).some(
            (e) => e.type === HANDOVER_ANSWERED && (e.data as { requestId?: unknown }).requestId === r.requestId,
          );
        } catch (err) {
          // Not readable now (the store briefly unreachable): looked at again in a while, until its deadline.
          this.deps.log(`hand-over ${r.action} of ${r.instanceId}: ${(err as Error).message}; looking again`);
          setTimeout(() => {
            if (!this.stopped) this.take(stream, r);
          }, STORE_RETRY_MS).unref();
          return;
        }
        if (answered) return;
        let answer: HandoverAnswer;
        try {
          answer = { requestId: r.requestId, by: this.deps.node, ok: true, ...(await this.deps.act(r)) };
        } catch (err) {
          // Lost the lease while acting: the new owner answers (its append was refused, nothing was done here).
          if (err instanceof FencedError) return;
          answer = {
            requestId: r.requestId,
            by: this.deps.node,
            ok: false,
            code: err instanceof RunlogError ? err.code : 'HANDOVER_FAILED',
            message: (err as Error).message,
          };
        }
        if (r.action !== 'logs')
          this.deps.log(`${r.action} of ${r.instanceId} asked by ${r.from}: ${answer.ok ? answer.state : answer.code}`);
        await this.deps
          .appendFact(stream, [{ type: HANDOVER_ANSWERED, data: { ...answer } }])
          .catch((e: unknown) =>
            this.deps.log(`could not record the answer to ${r.action} of ${r.instanceId}: ${(e as Error).message}`),
          );
      } finally {
        // Only once answered: a sweep meanwhile must not take it again.
        this.handling.delete(r.requestId);
      }
    })();
  }
}

/** Whether the instance's stream holds the event a request's action appended (its id in meta.handover). */
export function actedOn(events: readonly RecordedEvent[], requestId: string): boolean {
  return events.some((e) => (e.meta as { handover?: unknown } | undefined)?.handover === requestId);
}
