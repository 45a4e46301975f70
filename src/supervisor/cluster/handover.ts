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
//   restarted here), has read everything the dead owner committed (PgHostStore catches up before a takeover),
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
import type { HostStore } from '../../store/host-store.ts';
import { placementStream } from './placement.ts';

export interface HandoverDeps {
  store: HostStore;
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
  private off: (() => void) | null = null;
  private readonly handling = new Set<string>();
  /** Instances whose takeover is being recorded: their requests wait for tookOver(). */
  private readonly takingOver = new Set<string>();

  constructor(private readonly deps: HandoverDeps) {}

  /** Asks `owner` to carry it out; resolves with the answer, rejects with the owner's typed error or HANDOVER_TIMEOUT. */
  async ask(owner: string, action: HandoverAction, instanceId: string, graceMs: number | null, timeoutMs: number): Promise<HandoverAnswer> {
    const { store, node } = this.deps;
    const stream = placementStream(owner);
    const request: HandoverRequest = { requestId: randomUUID(), action, instanceId, graceMs, from: node, to: owner, deadline: new Date(this.deps.nowMs() + timeoutMs).toISOString() };
    let done: (a: HandoverAnswer | Error) => void = () => undefined;
    const outcome = new Promise<HandoverAnswer | Error>((resolve) => (done = resolve));
    // Following before the request is appended: no answer can be missed.
    const off = store.subscribe({ stream }, (e) => {
      // why: answers are only ever appended by take() below with this shape
      if (e.type === HANDOVER_ANSWERED && (e.data as { requestId?: unknown }).requestId === request.requestId) done(e.data as unknown as HandoverAnswer);
    });
    const timer = setTimeout(
      () => done(new RunlogError('HANDOVER_TIMEOUT', `node ${owner} did not answer ${action} of ${instanceId} within ${timeoutMs} ms (it is not acted on later)`, { id: instanceId, node: owner, action })),
      timeoutMs,
    );
    try {
      await this.deps.appendFact(stream, [{ type: HANDOVER_REQUESTED, data: { ...request } }]);
      const a = await outcome;
      if (a instanceof Error) throw a;
      if (!a.ok) throw answerError(a, instanceId);
      return a;
    } finally {
      clearTimeout(timer);
      off();
    }
  }

  /** Follows the log: requests about instances this node holds the lease of are carried out (any node's stream). */
  start(): void {
    const { store } = this.deps;
    for (const s of store.streams('placement')) this.sweep(s.stream);
    this.off = store.subscribe({ afterSeq: store.lastSeq() }, (e) => {
      if (e.type !== HANDOVER_REQUESTED) return;
      const r = parseRequest(e.data);
      if (r) this.take(e.stream, r);
    });
  }

  stop(): void {
    this.off?.();
    this.off = null;
  }

  /** Leases just taken over: their requests wait until what the survivor knows is recorded (tookOver). */
  taking(streams: readonly string[]): void {
    for (const s of streams) this.takingOver.add(s);
  }

  /** The takeover is recorded: pending requests for what was taken are carried out here now. */
  tookOver(streams: readonly string[]): void {
    for (const s of streams) this.takingOver.delete(s);
    for (const s of this.deps.store.streams('placement')) this.sweep(s.stream);
  }

  private sweep(stream: string): void {
    for (const r of pendingRequests(this.deps.store.readRecent(stream), this.deps.nowMs())) this.take(stream, r);
  }

  private take(stream: string, r: HandoverRequest): void {
    const instance = `instance-${r.instanceId}`;
    if (this.handling.has(r.requestId) || this.takingOver.has(instance) || !this.deps.owns(instance)) return;
    if (!(Date.parse(r.deadline) > this.deps.nowMs())) return; // its caller has given up
    // Answered meanwhile (by a previous owner that acted and answered before it lost the lease).
    if (this.deps.store.readRecent(stream).some((e) => e.type === HANDOVER_ANSWERED && (e.data as { requestId?: unknown }).requestId === r.requestId)) return;
    this.handling.add(r.requestId);
    void (async () => {
      try {
        let answer: HandoverAnswer;
        try {
          answer = { requestId: r.requestId, by: this.deps.node, ok: true, ...(await this.deps.act(r)) };
        } catch (err) {
          // Lost the lease while acting: the new owner answers (its append was refused, nothing was done here).
          if (err instanceof FencedError) return;
          answer = { requestId: r.requestId, by: this.deps.node, ok: false, code: err instanceof RunlogError ? err.code : 'HANDOVER_FAILED', message: (err as Error).message };
        }
        if (r.action !== 'logs') this.deps.log(`${r.action} of ${r.instanceId} asked by ${r.from}: ${answer.ok ? answer.state : answer.code}`);
        await this.deps
          .appendFact(stream, [{ type: HANDOVER_ANSWERED, data: { ...answer } }])
          .catch((e: unknown) => this.deps.log(`could not record the answer to ${r.action} of ${r.instanceId}: ${(e as Error).message}`));
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
