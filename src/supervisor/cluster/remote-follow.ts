// `logs --follow` of an instance another cluster node owns: the owner streams the instance's output to the node
// that took the call over an ephemeral pub/sub (store/postgres/follow-channel.ts: LISTEN/NOTIFY, never the
// event log; wire in domain/follow-frames.ts). Nodes know no address or token of each other, only the database.
//
// Follower (any node): picks a random follow id, LISTENs on that follow's channel, then asks the owner on its
// control channel (open). It yields the lines of the frames it receives and renews every RENEW_MS. It ends cleanly
// on an end frame (the instance exited), and with FOLLOW_LOST when no frame came for LOST_AFTER_MS (the owner
// died or was cut off: heartbeats come every HEARTBEAT_MS), when a packet is missing (gap), when its own LISTEN
// connection broke, or when the owner says the instance is no longer its own (taken over): the caller follows
// again, through whichever node owns it then. Its consumer going away (return()) sends a cancel.
//
// Owner (the lease holder): on open, answers hello and streams what its local follow yields (the buffered lines,
// then new ones), batched per BATCH_MS, with a heartbeat every HEARTBEAT_MS, one publish at a time (so packets
// commit in order). It stops publishing at the instance's end (end frame), at a cancel, when renewals stopped for
// ABANDON_MS (the follower's node died or was cut off: nothing leaks), or when it no longer holds the lease (error
// frame). An open for an instance it does not own, or does not run, gets an error frame.
import { randomBytes } from 'node:crypto';
import { isErrorCode, type ErrorCode } from '../../domain/error-codes.ts';
import { RunlogError } from '../../domain/errors.ts';
import {
  decodeControl,
  encodeControl,
  encodeFrame,
  FrameReader,
  type FollowFrame,
} from '../../domain/follow-frames.ts';
import type { LogLine } from '../../domain/log-line.ts';
import { followChannel, type FollowBus } from '../../store/postgres/follow-channel.ts';

export const HEARTBEAT_MS = 2000;
export const RENEW_MS = 3000;
/** No frame for this long: the owner is gone (three heartbeats missed, and some slack for a loaded database). */
export const LOST_AFTER_MS = 3 * HEARTBEAT_MS + 1000;
/** No renewal for this long: the follower is gone (three renewals missed). */
export const ABANDON_MS = 3 * RENEW_MS + 1000;
/** The owner's first frame (hello or error) must come within this. */
export const OPEN_TIMEOUT_MS = 10_000;
const BATCH_MS = 50;
/** Lines a follower keeps for a client that does not read them: past this it ends (the owner does not slow down). */
export const MAX_WAITING_LINES = 20_000;
/** Lines per frame at most: a frame is cut into packets anyway, this only keeps one frame's latency bounded. */
const BATCH_LINES = 500;

export interface Timers {
  nowMs(): number;
  setInterval(fn: () => void, ms: number): { clear(): void };
  setTimeout(fn: () => void, ms: number): { clear(): void };
}

export const realTimers: Timers = {
  nowMs: () => Date.now(),
  setInterval(fn, ms) {
    const t = setInterval(fn, ms);
    t.unref();
    return { clear: () => clearInterval(t) };
  },
  setTimeout(fn, ms) {
    const t = setTimeout(fn, ms);
    t.unref();
    return { clear: () => clearTimeout(t) };
  },
};

export interface FollowOwnerDeps {
  bus: FollowBus;
  /** This node's control channel (postgres/follow-channel.ts controlChannel). */
  channel: string;
  node: string;
  /** Whether this node holds the instance's lease now. */
  owns(instanceId: string): boolean;
  /** The local follow of an instance this node runs (throws a typed error when it does not run it). */
  open(instanceId: string): AsyncIterable<LogLine>;
  timers: Timers;
  log(message: string): void;
}

interface Served {
  followId: string;
  instanceId: string;
  from: string;
  channel: string;
  seq: number;
  renewedAt: number;
  lines: LogLine[];
  flush: { clear(): void } | null;
  /** The publishes of this follow, one after the other. */
  chain: Promise<void>;
  iterator: AsyncIterator<LogLine> | null;
  done: boolean;
}

/** The owner's side: serves the follows other nodes open on its control channel. */
export class FollowOwner {
  private readonly served = new Map<string, Served>();
  private unlisten: (() => void) | null = null;
  private tick: { clear(): void } | null = null;
  /** Follows that ended because their follower stopped renewing (a figure for tests and the curious). */
  abandoned = 0;
  /** Control payloads that were not ours (ignored). */
  bad = 0;

  constructor(private readonly d: FollowOwnerDeps) {}

  async start(): Promise<void> {
    this.unlisten = await this.d.bus.listen(this.d.channel, (p) => this.onControl(p));
    this.tick = this.d.timers.setInterval(() => this.beat(), HEARTBEAT_MS);
  }

  /** This node stops (its instances keep running): each follower is told at once to follow again later. */
  stop(): void {
    this.unlisten?.();
    this.unlisten = null;
    this.tick?.clear();
    for (const s of [...this.served.values()])
      this.finish(s, { t: 'error', code: 'FOLLOW_LOST', message: `node ${this.d.node} is stopping: follow again` });
  }

  /** The follows being published now (their ids). */
  active(): string[] {
    return [...this.served.keys()];
  }

  private onControl(payload: string): void {
    const m = decodeControl(payload);
    if (!m) {
      this.bad += 1;
      return;
    }
    if (m.t === 'open') return this.open(m.followId, m.instanceId, m.from);
    const s = this.served.get(m.followId);
    if (!s) return;
    if (m.t === 'renew') s.renewedAt = this.d.timers.nowMs();
    else this.finish(s, { t: 'end', reason: 'cancelled' });
  }

  private open(followId: string, instanceId: string, from: string): void {
    if (this.served.has(followId)) return;
    const s: Served = {
      followId,
      instanceId,
      from,
      channel: followChannel(followId),
      seq: 0,
      renewedAt: this.d.timers.nowMs(),
      lines: [],
      flush: null,
      chain: Promise.resolve(),
      iterator: null,
      done: false,
    };
    if (!this.d.owns(instanceId)) {
      this.publish(s, {
        t: 'error',
        code: 'FOLLOW_LOST',
        message: `node ${this.d.node} does not own ${instanceId} (any more): follow again`,
      });
      return;
    }
    let iterable: AsyncIterable<LogLine>;
    try {
      iterable = this.d.open(instanceId);
    } catch (err) {
      this.publish(s, {
        t: 'error',
        code: err instanceof RunlogError ? err.code : 'FOLLOW_LOST',
        message: (err as Error).message,
      });
      return;
    }
    this.served.set(followId, s);
    this.d.log(`follow ${followId} of ${instanceId} for node ${from}: publishing`);
    this.publish(s, { t: 'hello', by: this.d.node });
    s.iterator = iterable[Symbol.asyncIterator]();
    void this.pump(s);
  }

  private async pump(s: Served): Promise<void> {
    try {
      for (;;) {
        const next = await s.iterator!.next();
        if (s.done) return;
        if (next.done) break;
        s.lines.push(next.value);
        if (s.lines.length >= BATCH_LINES) this.flushLines(s);
        else s.flush ??= this.d.timers.setTimeout(() => this.flushLines(s), BATCH_MS);
      }
      this.finish(s, { t: 'end', reason: 'exited' });
    } catch (err) {
      this.finish(s, {
        t: 'error',
        code: err instanceof RunlogError ? err.code : 'FOLLOW_LOST',
        message: (err as Error).message,
      });
    }
  }

  private flushLines(s: Served): void {
    s.flush?.clear();
    s.flush = null;
    if (s.lines.length === 0) return;
    const lines = s.lines.splice(0);
    this.publish(s, { t: 'lines', lines });
  }

  /** Every HEARTBEAT_MS: a heartbeat to each follower; follows whose follower went quiet, or whose lease moved, end. */
  private beat(): void {
    const now = this.d.timers.nowMs();
    for (const s of [...this.served.values()]) {
      if (now - s.renewedAt > ABANDON_MS) {
        this.abandoned += 1;
        this.d.log(
          `follow ${s.followId} of ${s.instanceId} for node ${s.from}: no renewal for ${now - s.renewedAt} ms, not published any more`,
        );
        this.finish(s, null);
      } else if (!this.d.owns(s.instanceId)) {
        this.finish(s, {
          t: 'error',
          code: 'FOLLOW_LOST',
          message: `${s.instanceId} is no longer owned by node ${this.d.node}: follow again`,
        });
      } else this.publish(s, { t: 'hb' });
    }
  }

  /** Ends a follow: the lines not sent yet, then its last frame (none for a follower that is gone). */
  private finish(s: Served, last: FollowFrame | null): void {
    if (s.done) return;
    s.done = true;
    this.served.delete(s.followId);
    if (last) {
      this.flushLines(s);
      this.publish(s, last);
    }
    s.flush?.clear();
    // Lets go of the local follow (an async generator waiting for a line returns once that line or the end comes).
    void s.iterator?.return?.()?.catch(() => undefined);
    this.d.log(
      `follow ${s.followId} of ${s.instanceId} for node ${s.from}: ended` +
        `${last?.t === 'end' ? ` (${last.reason})` : last?.t === 'error' ? ` (${last.code})` : ''}`,
    );
  }

  private publish(s: Served, frame: FollowFrame): void {
    const payloads = encodeFrame(frame, s.seq);
    s.seq += payloads.length;
    s.chain = s.chain
      .then(async () => {
        for (const p of payloads) await this.d.bus.notify(s.channel, p);
      })
      .catch((err: unknown) => {
        // A packet not sent leaves a gap the follower sees (it ends with FOLLOW_LOST): nothing more goes out for it.
        if (!s.done) this.finish(s, null);
        this.d.log(`follow ${s.followId}: could not publish: ${(err as Error).message}`);
      });
  }
}

export interface FollowRemoteDeps {
  bus: FollowBus;
  node: string;
  timers: Timers;
}

/**
 * Follows an instance `owner` runs, through its control channel: the lines it prints from now on (after those it
 * had buffered), until it exits. Throws FOLLOW_LOST (typed) when the stream cannot go on.
 */
export function followRemote(
  d: FollowRemoteDeps,
  owner: string,
  ownerChannel: string,
  instanceId: string,
  signal?: AbortSignal,
): AsyncIterable<LogLine> {
  return {
    [Symbol.asyncIterator]() {
      const followId = randomBytes(16).toString('hex');
      const reader = new FrameReader();
      const queue: LogLine[] = [];
      let ended: { error: Error | null } | null = null;
      let wake: (() => void) | null = null;
      let unlisten: (() => void) | null = null;
      let lastFrameAt = d.timers.nowMs();
      let hello = false;
      const timers: { clear(): void }[] = [];
      const lost = (why: string): Error =>
        new RunlogError(
          'FOLLOW_LOST',
          `following ${instanceId} on node ${owner}: ${why}; follow again (through any node: it goes to whichever owns it then)`,
          { id: instanceId, node: owner },
        );
      const end = (error: Error | null): void => {
        if (ended) return;
        ended = { error };
        for (const t of timers) t.clear();
        unlisten?.();
        wake?.();
      };
      const onFrame = (f: FollowFrame): void => {
        lastFrameAt = d.timers.nowMs();
        if (f.t === 'hello') hello = true;
        else if (f.t === 'lines') {
          queue.push(...f.lines);
          if (queue.length > MAX_WAITING_LINES) {
            queue.length = 0;
            cancel(lost(`its client read too slowly (${MAX_WAITING_LINES} lines waiting)`));
          }
        } else if (f.t === 'end') end(null);
        else if (f.t === 'error')
          end(
            new RunlogError((isErrorCode(f.code) ? f.code : 'FOLLOW_LOST') as ErrorCode, f.message, {
              id: instanceId,
              node: owner,
            }),
          );
        wake?.();
      };
      const onPayload = (p: string): void => {
        if (ended) return;
        const r = reader.push(p);
        if (r.kind === 'frame') onFrame(r.frame);
        else if (r.kind === 'gap') end(lost(`frames were missed (expected packet ${r.expected}, got ${r.got})`));
      };
      const cancel = (error: Error | null = null): void => {
        if (ended) return;
        end(error);
        d.bus.notify(ownerChannel, encodeControl({ t: 'cancel', followId })).catch(() => undefined);
      };
      const aborted = (): void => cancel();
      signal?.addEventListener('abort', aborted, { once: true });
      const started = (async () => {
        unlisten = await d.bus.listen(followChannel(followId), onPayload, () =>
          end(lost('the connection to PostgreSQL broke')),
        );
        if (ended) return unlisten();
        await d.bus.notify(ownerChannel, encodeControl({ t: 'open', followId, instanceId, from: d.node }));
        lastFrameAt = d.timers.nowMs();
        timers.push(
          d.timers.setInterval(
            () => void d.bus.notify(ownerChannel, encodeControl({ t: 'renew', followId })).catch(() => undefined),
            RENEW_MS,
          ),
        );
        timers.push(
          d.timers.setInterval(() => {
            const quiet = d.timers.nowMs() - lastFrameAt;
            if (!hello && quiet > OPEN_TIMEOUT_MS)
              end(
                new RunlogError(
                  'NODE_UNAVAILABLE',
                  `node ${owner} did not answer the follow of ${instanceId} within ${OPEN_TIMEOUT_MS} ms`,
                  { id: instanceId, node: owner },
                ),
              );
            else if (hello && quiet > LOST_AFTER_MS)
              end(lost(`node ${owner} sent nothing for ${quiet} ms (it stopped or was cut off)`));
          }, 500),
        );
      })().catch((err: unknown) =>
        end(err instanceof RunlogError ? err : lost(`could not reach PostgreSQL: ${(err as Error).message}`)),
      );
      return {
        async next(): Promise<IteratorResult<LogLine>> {
          await started;
          for (;;) {
            if (queue.length > 0) return { done: false, value: queue.shift()! };
            if (ended) {
              signal?.removeEventListener('abort', aborted);
              if (ended.error) {
                const e = ended.error;
                ended.error = null; // thrown once; later calls are done
                throw e;
              }
              return { done: true, value: undefined };
            }
            await new Promise<void>((r) => (wake = r));
            wake = null;
          }
        },
        async return(): Promise<IteratorResult<LogLine>> {
          cancel();
          signal?.removeEventListener('abort', aborted);
          return { done: true, value: undefined };
        },
      };
    },
  };
}
