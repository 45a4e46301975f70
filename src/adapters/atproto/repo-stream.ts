// Follows a relay's or PDS's repo event stream (com.atproto.sync.subscribeRepos) with a cursor the caller owns.
//
//   const stream = openRepoStream({ service: 'https://pds.example', cursor: lastRecordedSeq });
//   for await (const message of stream) {
//     for (const job of jobCreatesOf(message)) ...;   // record it durably, then:
//     if ('seq' in message) stream.ack(message.seq);
//   }
//
// Nothing is lost. The client reconnects (with a bounded backoff) from the last seq the consumer acknowledged, and
// drops a seq at or below the highest one it already took (counted as a duplicate), so within one stream each event
// is delivered once and in order, whether the relay drops, replays or the buffer fills. Across restarts the consumer
// opens a new stream at the cursor it recorded: it may see again an event it took but had not recorded (at least
// once, never lost), and drops by seq what it has. Acknowledge every message with a seq, those that carry nothing of
// interest included, or the cursor stays behind and a reconnect replays more than it must.
//
// Memory is bounded: messages wait in a buffer of `bufferSize`. When it fills, the client stops reading (it closes
// the socket: a WebSocket cannot be paused) and reconnects from the acknowledged cursor once the consumer has taken
// half of it. A relay that sends faster than the consumer takes is held to the buffer, and no event is dropped: what
// was not read is read again. Node's global WebSocket (Node ≥ 22, repo-stream-socket.ts) is the default socket;
// a test injects its own.

import { ValidationError } from '../../domain/errors.ts';
import { AT_RUN_V2 } from './collections.ts';
import { RepoStreamError, createsOf, decodeRepoStreamFrame, type CreatedRecord } from './repo-stream-frames.ts';
import type { RepoStreamMessage } from './repo-stream-frames.ts';
import {
  webSocketFactory,
  type StreamSocket,
  type StreamSocketFactory,
  type StreamSocketHandlers,
} from './repo-stream-socket.ts';

export type { CreatedRecord, RepoOp, RepoOpAction, RepoStreamMessage } from './repo-stream-frames.ts';
export { RepoStreamError, createsOf } from './repo-stream-frames.ts';
export {
  webSocketFactory,
  type StreamSocket,
  type StreamSocketFactory,
  type StreamSocketHandlers,
} from './repo-stream-socket.ts';

export interface StreamTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface RepoStreamOptions {
  /** The relay or PDS: http(s) or ws(s), with or without the /xrpc/com.atproto.sync.subscribeRepos path. */
  service: string;
  /** Start after this seq (the last one the consumer recorded); absent, start at the live end. */
  cursor?: number;
  /** Messages held for the consumer before the client stops reading. Default 256. */
  bufferSize?: number;
  /** Reconnect delays: initialMs doubling up to maxMs. Defaults 250 ms and 30 s. */
  backoff?: { initialMs?: number; maxMs?: number };
  /** A connection not open within this is dropped and tried again (it counts as a failed attempt). Default 30 s. */
  openTimeoutMs?: number;
  /** Failed connections in a row (no message between them) before REPO_STREAM_UNAVAILABLE. Default: no limit. */
  maxAttempts?: number;
  connect?: StreamSocketFactory;
  timers?: StreamTimers;
}

export interface RepoStreamCounters {
  /** Frames decoded (duplicates and skipped ones included). */
  received: number;
  /** Messages waiting for the consumer now, and at most so far. */
  buffered: number;
  maxBuffered: number;
  /** Connections opened again after one dropped (not after a pause). */
  reconnects: number;
  /** Times the buffer filled and reading stopped. */
  pauses: number;
  /** Messages dropped because their seq was already taken (a replay). */
  duplicates: number;
  /** Frames of a type this client does not know. */
  skipped: number;
  /** Error frames the server sent. */
  errorFrames: number;
}

export interface RepoStream extends AsyncIterable<RepoStreamMessage> {
  /** Records that the consumer has durably taken every message up to `seq`: a reconnect resumes after it. */
  ack(seq: number): void;
  /**
   * The last acknowledged seq, or the starting cursor before any ack: what to record, and where a reconnect
   * resumes (with neither, a reconnect resumes after the last seq taken into the buffer).
   */
  readonly cursor: number | undefined;
  readonly counters: Readonly<RepoStreamCounters>;
  /** The last connection failure or error frame, for diagnostics (the stream keeps reconnecting). */
  readonly lastError: Error | undefined;
  /** Closes the socket, cancels the reconnect timer and ends the iteration. */
  close(): Promise<void>;
}

const DEFAULT_BUFFER = 256;
const MAX_BUFFER = 1_000_000;
const SUBSCRIBE_PATH = '/xrpc/com.atproto.sync.subscribeRepos';
/** Error frames after which connecting again with the same cursor cannot help. */
const FATAL_ERRORS = new Set(['FutureCursor']);

/**
 * The job records created in a message: what the runner's intake fetches and verifies next. A commit marked
 * `tooBig` (no current PDS sends one) may not list every op.
 */
export function jobCreatesOf(message: RepoStreamMessage): CreatedRecord[] {
  return createsOf(message, AT_RUN_V2.job);
}

/** The ws(s) URL of `service`'s subscribeRepos, with `cursor` when given. Throws OPTIONS_INVALID. */
export function subscribeReposUrl(service: string, cursor?: number): string {
  let url: URL;
  try {
    url = new URL(service);
  } catch {
    throw new ValidationError('OPTIONS_INVALID', `repo stream service ${JSON.stringify(service)} is not a URL`);
  }
  const scheme = { 'http:': 'ws:', 'https:': 'wss:', 'ws:': 'ws:', 'wss:': 'wss:' }[url.protocol];
  if (!scheme) throw new ValidationError('OPTIONS_INVALID', `repo stream service ${service} is not http(s) or ws(s)`);
  url.protocol = scheme;
  if (!url.pathname.endsWith(SUBSCRIBE_PATH)) url.pathname = url.pathname.replace(/\/+$/, '') + SUBSCRIBE_PATH;
  url.search = '';
  url.hash = '';
  if (cursor !== undefined) url.searchParams.set('cursor', String(cursor));
  return url.toString();
}

function checkOptions(o: RepoStreamOptions): string[] {
  const issues: string[] = [];
  const seq = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  if (o.cursor !== undefined && !seq(o.cursor)) issues.push('cursor must be a non-negative integer');
  const b = o.bufferSize;
  if (b !== undefined && !(Number.isSafeInteger(b) && b >= 1 && b <= MAX_BUFFER))
    issues.push(`bufferSize must be an integer from 1 to ${MAX_BUFFER}`);
  for (const k of ['initialMs', 'maxMs'] as const) {
    const v = o.backoff?.[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v >= 0))
      issues.push(`backoff.${k} must be a non-negative number of ms`);
  }
  const t = o.openTimeoutMs;
  if (t !== undefined && !(typeof t === 'number' && Number.isFinite(t) && t > 0))
    issues.push('openTimeoutMs must be a positive number of ms');
  if (o.maxAttempts !== undefined && !(Number.isSafeInteger(o.maxAttempts) && o.maxAttempts >= 1))
    issues.push('maxAttempts must be a positive integer');
  return issues;
}

/** Opens the stream and starts connecting. See the header for the delivery and memory guarantees. */
export function openRepoStream(options: RepoStreamOptions): RepoStream {
  const issues = checkOptions(options);
  subscribeReposUrl(options.service);
  if (issues.length > 0) throw new ValidationError('OPTIONS_INVALID', 'invalid repo stream options', issues);
  return new RepoStreamClient(options);
}

type State = 'connecting' | 'open' | 'paused' | 'waiting' | 'closed' | 'failed';

class RepoStreamClient implements RepoStream {
  private state: State = 'connecting';
  private readonly buffer: RepoStreamMessage[] = [];
  private readonly size: number;
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly openTimeoutMs: number;
  private readonly connectSocket: StreamSocketFactory;
  private readonly timers: StreamTimers;
  private socket: StreamSocket | null = null;
  private readonly closing = new Set<Promise<void>>();
  /** The reconnect delay, or the wait for a connection to open: never both. */
  private timer: unknown = null;
  private attempts = 0;
  private acked: number | undefined;
  /** The highest seq taken into the buffer: anything at or below it is a replay. */
  private highest: number | undefined;
  /** The highest seq handed to the consumer: an ack may not go beyond it. */
  private delivered: number | undefined;
  private waiter: { resolve: () => void } | null = null;
  private failure: Error | null = null;
  private readonly stats: Omit<RepoStreamCounters, 'buffered'> = {
    received: 0,
    maxBuffered: 0,
    reconnects: 0,
    pauses: 0,
    duplicates: 0,
    skipped: 0,
    errorFrames: 0,
  };
  lastError: Error | undefined;

  constructor(private readonly options: RepoStreamOptions) {
    this.size = options.bufferSize ?? DEFAULT_BUFFER;
    this.initialMs = options.backoff?.initialMs ?? 250;
    this.maxMs = Math.max(this.initialMs, options.backoff?.maxMs ?? 30_000);
    this.openTimeoutMs = options.openTimeoutMs ?? 30_000;
    this.connectSocket = options.connect ?? webSocketFactory;
    this.timers = options.timers ?? {
      setTimeout: (fn, ms) => setTimeout(fn, ms),
      clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
    };
    this.acked = options.cursor;
    this.highest = options.cursor;
    this.connect();
  }

  get cursor(): number | undefined {
    return this.acked;
  }

  get counters(): Readonly<RepoStreamCounters> {
    return { ...this.stats, buffered: this.buffer.length };
  }

  ack(seq: number): void {
    if (!Number.isSafeInteger(seq) || seq < 0)
      throw new ValidationError('OPTIONS_INVALID', `ack takes a seq (a non-negative integer), got ${String(seq)}`);
    if (this.delivered === undefined || seq > this.delivered)
      throw new ValidationError(
        'OPTIONS_INVALID',
        `ack(${seq}) is beyond the last seq delivered (${this.delivered ?? 'none'}): a reconnect would skip events`,
      );
    if (this.acked === undefined || seq > this.acked) this.acked = seq;
  }

  [Symbol.asyncIterator](): AsyncIterator<RepoStreamMessage> {
    return {
      next: () => this.next(),
      return: async () => {
        await this.close();
        return { done: true, value: undefined };
      },
    };
  }

  async close(): Promise<void> {
    if (this.state !== 'failed') this.state = 'closed';
    this.buffer.length = 0; // what was not taken is read again by whoever resumes from the cursor
    this.cancelTimer();
    this.dropSocket();
    this.wake();
    await Promise.all([...this.closing]);
  }

  private async next(): Promise<IteratorResult<RepoStreamMessage>> {
    for (;;) {
      const message = this.buffer.shift();
      if (message) {
        if ('seq' in message) this.delivered = message.seq;
        if (this.state === 'paused' && this.buffer.length <= Math.floor(this.size / 2)) this.connect();
        return { done: false, value: message };
      }
      if (this.state === 'failed' && this.failure) {
        const err = this.failure;
        this.failure = null; // thrown once; the iteration then ends
        throw err;
      }
      if (this.state === 'failed' || this.state === 'closed') return { done: true, value: undefined };
      if (this.waiter) throw new Error('a repo stream has one consumer: next() was called before the last one settled');
      await new Promise<void>((resolve) => (this.waiter = { resolve }));
      this.waiter = null;
    }
  }

  private wake(): void {
    this.waiter?.resolve();
  }

  /** Where a (re)connection starts: after the acknowledged seq, else after what was already taken. */
  private resumeCursor(): number | undefined {
    return this.acked ?? this.highest;
  }

  private connect(): void {
    this.cancelTimer();
    this.state = 'connecting';
    const url = subscribeReposUrl(this.options.service, this.resumeCursor());
    let live = true;
    const on: StreamSocketHandlers = {
      open: () => {
        if (!live || this.state !== 'connecting') return;
        this.cancelTimer();
        this.state = 'open';
      },
      message: (data) => {
        if (!live) return;
        on.open(); // a frame says the connection is open, whatever the socket reported
        this.onFrame(data);
      },
      close: (code, reason) => {
        if (!live) return;
        live = false;
        this.socket = null;
        this.cancelTimer();
        this.lastError = new RepoStreamError(
          'REPO_STREAM_UNAVAILABLE',
          `the repo event stream at ${url} closed (${code}${reason ? `: ${reason}` : ''})`,
          { url, code, reason },
        );
        this.retry();
      },
    };
    // The wrapper is in place before the factory runs: a socket that reports at once (a fake, say) and fills the
    // buffer is dropped like any other.
    let inner: StreamSocket | null = null;
    this.socket = {
      close: () => {
        live = false;
        return inner ? inner.close() : Promise.resolve();
      },
    };
    try {
      inner = this.connectSocket(url, on);
    } catch (err) {
      this.socket = null;
      this.fail(err as Error);
      return;
    }
    if (!live) {
      this.track(inner.close());
      return;
    }
    if (this.state !== 'connecting') return; // it opened (or closed) at once
    this.timer = this.timers.setTimeout(() => {
      this.timer = null;
      if (!live || this.state !== 'connecting') return;
      this.dropSocket();
      this.lastError = new RepoStreamError(
        'REPO_STREAM_UNAVAILABLE',
        `the repo event stream at ${url} did not open within ${this.openTimeoutMs} ms`,
        { url },
      );
      this.retry();
    }, this.openTimeoutMs);
  }

  private dropSocket(): void {
    if (this.state === 'connecting') this.cancelTimer();
    const socket = this.socket;
    this.socket = null;
    if (socket) this.track(socket.close());
  }

  /** A socket still closing: close() waits for it. */
  private track(closing: Promise<void>): void {
    const done = closing.catch(() => undefined);
    this.closing.add(done);
    void done.finally(() => this.closing.delete(done));
  }

  private cancelTimer(): void {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
  }

  /** After a connection dropped: wait (doubling, bounded) and connect again, unless the attempts are spent. */
  private retry(): void {
    if (this.state === 'closed' || this.state === 'failed' || this.state === 'paused') return;
    this.attempts++;
    const max = this.options.maxAttempts;
    if (max !== undefined && this.attempts > max) {
      this.fail(
        new RepoStreamError(
          'REPO_STREAM_UNAVAILABLE',
          `the repo event stream at ${this.options.service} could not be reached in ${max} attempts`,
          { service: this.options.service, attempts: max },
          { cause: this.lastError },
        ),
      );
      return;
    }
    const delay = Math.min(this.maxMs, this.initialMs * 2 ** Math.min(this.attempts - 1, 30));
    this.state = 'waiting';
    this.timer = this.timers.setTimeout(() => {
      this.timer = null;
      if (this.state !== 'waiting') return;
      this.stats.reconnects++;
      this.connect();
    }, delay);
  }

  private fail(err: Error): void {
    if (this.state === 'closed' || this.state === 'failed') return;
    this.state = 'failed';
    this.failure = err;
    this.lastError = err;
    this.cancelTimer();
    this.dropSocket();
    this.wake();
  }

  private onFrame(data: Uint8Array | string): void {
    if (typeof data === 'string') {
      this.fail(new RepoStreamError('REPO_STREAM_FRAME_INVALID', 'the repo event stream sent a text frame'));
      return;
    }
    let frame: ReturnType<typeof decodeRepoStreamFrame>;
    try {
      frame = decodeRepoStreamFrame(data);
    } catch (err) {
      // A frame that cannot be read names an event that cannot be taken: skipping it would lose it silently.
      this.fail(err as Error);
      return;
    }
    this.stats.received++;
    if (frame.kind === 'error') {
      this.stats.errorFrames++;
      const err = new RepoStreamError(
        'REPO_STREAM_ERROR',
        `the repo event stream at ${this.options.service} sent ${frame.error}${frame.message ? `: ${frame.message}` : ''}`,
        { error: frame.error, ...(frame.message ? { message: frame.message } : {}) },
      );
      this.lastError = err;
      if (FATAL_ERRORS.has(frame.error)) this.fail(err);
      else {
        this.dropSocket(); // the server closes after an error frame; connect again from the cursor
        this.retry();
      }
      return;
    }
    this.attempts = 0;
    if (frame.kind === 'unknown') {
      this.stats.skipped++;
      return;
    }
    const message = frame.message;
    if ('seq' in message) {
      if (this.highest !== undefined && message.seq <= this.highest) {
        this.stats.duplicates++;
        return;
      }
      this.highest = message.seq;
    }
    this.buffer.push(message);
    this.stats.maxBuffered = Math.max(this.stats.maxBuffered, this.buffer.length);
    this.wake();
    if (this.buffer.length >= this.size && this.state !== 'paused') {
      // Full: stop reading. What the server sends meanwhile is read again from the cursor after the pause.
      this.stats.pauses++;
      this.state = 'paused';
      this.dropSocket();
    }
  }
}
