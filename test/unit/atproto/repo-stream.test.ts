// The repo event stream client against a fake relay (an injected socket factory) and fake timers: delivery in
// order, the caller-owned cursor, reconnects with a bounded backoff from the acknowledged seq, duplicates dropped,
// a bounded buffer that stops reading and resumes without losing an event, error frames, and close().

import { afterEach, describe, expect, it } from 'vitest';
import {
  openRepoStream,
  subscribeReposUrl,
  RepoStreamError,
  type RepoStream,
  type RepoStreamMessage,
  type StreamSocket,
  type StreamSocketHandlers,
  type StreamTimers,
} from '../../../src/adapters/atproto/index.ts';
import { ValidationError } from '../../../src/domain/errors.ts';
import { commitFrame, errorFrame, frame } from '../../support/repo-stream-frames.ts';

const ALICE = 'did:plc:alice00000000000000000000';
const JOB = 'dev.mainasara.at-run.beta.v2.job';
const SERVICE = 'http://127.0.0.1:2583';

class FakeSocket implements StreamSocket {
  closed = false;
  constructor(
    readonly url: string,
    readonly on: StreamSocketHandlers,
  ) {}
  get cursor(): number | undefined {
    const c = new URL(this.url).searchParams.get('cursor');
    return c === null ? undefined : Number(c);
  }
  send(bytes: Uint8Array | string): void {
    if (!this.closed) this.on.message(bytes);
  }
  drop(code = 1006): void {
    if (this.closed) return;
    this.closed = true;
    this.on.close(code, '');
  }
  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}

/** A relay with a log of commits (seq 1..n): each connection opens on the next macrotask and sends every commit after its cursor. */
class FakeRelay {
  readonly sockets: FakeSocket[] = [];
  readonly log: Uint8Array[] = [];
  autoSend = true;
  constructor(commits = 0) {
    for (let i = 0; i < commits; i++) this.append();
  }
  append(): number {
    const seq = this.log.length + 1;
    this.log.push(commitFrame(seq, ALICE, [{ action: 'create', path: `${JOB}/job${seq}` }]));
    for (const s of this.sockets) if (!s.closed && this.autoSend) s.send(this.log[seq - 1]!);
    return seq;
  }
  readonly connect = (url: string, on: StreamSocketHandlers): StreamSocket => {
    const socket = new FakeSocket(url, on);
    this.sockets.push(socket);
    setImmediate(() => {
      if (socket.closed) return;
      on.open();
      if (!this.autoSend) return;
      for (let i = socket.cursor ?? this.log.length; i < this.log.length && !socket.closed; i++)
        socket.send(this.log[i]!);
    });
    return socket;
  };
  get last(): FakeSocket {
    return this.sockets.at(-1)!;
  }
  open(): FakeSocket[] {
    return this.sockets.filter((s) => !s.closed);
  }
}

class FakeTimers implements StreamTimers {
  private next = 1;
  readonly pending = new Map<number, { fn: () => void; ms: number }>();
  readonly delays: number[] = [];
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.pending.set(id, { fn, ms });
    this.delays.push(ms);
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  fire(): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const t of all) t.fn();
  }
}

const settle = () => new Promise<void>((r) => setImmediate(r));
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (cond()) return;
    await settle();
  }
  throw new Error(`timed out waiting for ${what}`);
}

const seqOf = (m: RepoStreamMessage): number => ('seq' in m ? m.seq : -1);

/** Takes `n` messages, acknowledging each, and returns their seqs. */
async function take(stream: RepoStream, n: number, ack = true): Promise<number[]> {
  const seqs: number[] = [];
  const it = stream[Symbol.asyncIterator]();
  while (seqs.length < n) {
    const r = await it.next();
    if (r.done) break;
    seqs.push(seqOf(r.value));
    if (ack && 'seq' in r.value) stream.ack(r.value.seq);
  }
  return seqs;
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

let open: RepoStream[] = [];
function start(relay: FakeRelay, timers: FakeTimers, extra: Partial<Parameters<typeof openRepoStream>[0]> = {}) {
  const stream = openRepoStream({ service: SERVICE, connect: relay.connect, timers, ...extra });
  open.push(stream);
  return stream;
}
afterEach(async () => {
  await Promise.all(open.map((s) => s.close()));
  open = [];
});

describe('subscribeReposUrl', () => {
  it('turns a service URL into the subscribeRepos WebSocket URL, with the cursor when there is one', () => {
    expect(subscribeReposUrl('http://127.0.0.1:2583')).toBe('ws://127.0.0.1:2583/xrpc/com.atproto.sync.subscribeRepos');
    expect(subscribeReposUrl('https://bsky.network/', 42)).toBe(
      'wss://bsky.network/xrpc/com.atproto.sync.subscribeRepos?cursor=42',
    );
    expect(subscribeReposUrl('wss://relay.example/xrpc/com.atproto.sync.subscribeRepos?cursor=1', 0)).toBe(
      'wss://relay.example/xrpc/com.atproto.sync.subscribeRepos?cursor=0',
    );
    expect(() => subscribeReposUrl('ftp://x')).toThrow(ValidationError);
    expect(() => subscribeReposUrl('not a url')).toThrow(ValidationError);
  });

  it('refuses options that would not bound anything, listing each', () => {
    let err: unknown;
    try {
      openRepoStream({ service: SERVICE, cursor: -1, bufferSize: 0, backoff: { initialMs: -5 }, maxAttempts: 0 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues).toEqual([
      'cursor must be a non-negative integer',
      'bufferSize must be an integer from 1 to 1000000',
      'backoff.initialMs must be a non-negative number of ms',
      'maxAttempts must be a positive integer',
    ]);
  });
});

describe('openRepoStream', () => {
  it('delivers the events after its cursor in order, and counts them', async () => {
    const relay = new FakeRelay(5);
    const stream = start(relay, new FakeTimers(), { cursor: 2 });
    expect(relay.last.cursor).toBe(2);
    expect(await take(stream, 3)).toEqual([3, 4, 5]);
    relay.append();
    expect(await take(stream, 1)).toEqual([6]);
    expect(stream.cursor).toBe(6);
    expect(stream.counters).toMatchObject({ received: 4, buffered: 0, reconnects: 0, duplicates: 0 });
  });

  it('starts at the live end without a cursor', async () => {
    const relay = new FakeRelay(3);
    const stream = start(relay, new FakeTimers());
    expect(relay.last.cursor).toBeUndefined();
    await until(() => relay.last.on !== undefined, 'the connection');
    await settle();
    relay.append();
    expect(await take(stream, 1)).toEqual([4]);
  });

  it('refuses an ack beyond what it delivered: a reconnect from there would skip events', async () => {
    const relay = new FakeRelay(2);
    const stream = start(relay, new FakeTimers(), { cursor: 0 });
    expect(() => stream.ack(1)).toThrow(/beyond the last seq delivered \(none\)/);
    expect(await take(stream, 1, false)).toEqual([1]);
    expect(() => stream.ack(2)).toThrow(ValidationError);
    stream.ack(1);
    stream.ack(0); // an older ack moves nothing back
    expect(stream.cursor).toBe(1);
  });

  it('reconnects after a drop from the acknowledged seq, with a doubling delay that stops at its bound', async () => {
    const relay = new FakeRelay(3);
    relay.autoSend = false;
    const timers = new FakeTimers();
    const stream = start(relay, timers, { cursor: 0, backoff: { initialMs: 100, maxMs: 350 } });
    await settle(); // open
    for (let i = 0; i < 4; i++) {
      relay.last.drop();
      expect(timers.pending.size).toBe(1);
      timers.fire();
      await settle();
    }
    const backoff = () => timers.delays.filter((ms) => ms !== 30_000); // not the waits for each to open
    expect(backoff()).toEqual([100, 200, 350, 350]);
    expect(relay.sockets.map((s) => s.cursor)).toEqual([0, 0, 0, 0, 0]);
    expect(stream.counters.reconnects).toBe(4);
    expect(stream.lastError).toBeInstanceOf(RepoStreamError);
    // A message resets the backoff.
    relay.autoSend = true;
    relay.last.send(relay.log[0]!);
    expect(await take(stream, 1)).toEqual([1]);
    relay.last.drop();
    expect(backoff().at(-1)).toBe(100);
  });

  it('drops a connection that does not open in time and tries again, as a failed attempt', async () => {
    const relay = new FakeRelay();
    const sockets: FakeSocket[] = [];
    const silent = (url: string, on: StreamSocketHandlers) => {
      const s = new FakeSocket(url, on);
      sockets.push(s);
      return s; // never opens
    };
    const timers = new FakeTimers();
    const stream = start(relay, timers, { connect: silent, openTimeoutMs: 5000, maxAttempts: 1 });
    expect(timers.delays).toEqual([5000]);
    timers.fire();
    expect(sockets[0]!.closed).toBe(true);
    expect(stream.lastError?.message).toMatch(/did not open within 5000 ms/);
    expect(timers.delays).toEqual([5000, 250]);
    timers.fire();
    expect(sockets).toHaveLength(2);
    timers.fire(); // the second one does not open either: the one attempt allowed is spent
    await expect(take(stream, 1)).rejects.toMatchObject({ code: 'REPO_STREAM_UNAVAILABLE' });
    expect(timers.pending.size).toBe(0);
  });

  it('loses nothing and repeats nothing when the relay drops mid-stream and replays from the cursor', async () => {
    const relay = new FakeRelay(10);
    const timers = new FakeTimers();
    const stream = start(relay, timers, { cursor: 0 });
    const first = await take(stream, 4);
    expect(first).toEqual([1, 2, 3, 4]);
    // Delivered 1-4 and acknowledged them; 5-10 wait in the buffer. The relay drops and replays from cursor 4.
    relay.last.drop();
    timers.fire();
    expect(relay.last.cursor).toBe(4);
    const rest = await take(stream, 6);
    expect(rest).toEqual([5, 6, 7, 8, 9, 10]);
    await settle();
    expect(stream.counters.duplicates).toBe(6);
    expect(stream.counters.buffered).toBe(0);
  });

  it('holds a burst to its buffer: stops reading when full and resumes from the cursor without a gap', async () => {
    const relay = new FakeRelay(100);
    const timers = new FakeTimers();
    const stream = start(relay, timers, { cursor: 0, bufferSize: 8 });
    const seqs: number[] = [];
    let maxSeen = 0;
    for await (const m of stream) {
      seqs.push(seqOf(m));
      stream.ack(seqOf(m));
      maxSeen = Math.max(maxSeen, stream.counters.buffered);
      if (seqs.length === 100) break;
      if (seqs.length % 10 === 0) await settle(); // a slow consumer now and then
    }
    expect(seqs).toEqual(range(1, 100));
    expect(maxSeen).toBeLessThanOrEqual(8);
    expect(stream.counters.maxBuffered).toBeLessThanOrEqual(8);
    expect(stream.counters.pauses).toBeGreaterThan(0);
    expect(stream.counters.reconnects).toBe(0);
    expect(timers.pending.size).toBe(0);
    // Every resume started from the acknowledged cursor, which only moves forward.
    const cursors = relay.sockets.map((s) => s.cursor!);
    expect(cursors).toEqual([...cursors].sort((a, b) => a - b));
    expect(relay.open()).toHaveLength(0); // the break closed the stream
  });

  it('a consumer that does not acknowledge gets no event twice, and resumes after what it already took', async () => {
    const relay = new FakeRelay(20);
    const stream = start(relay, new FakeTimers(), { bufferSize: 4, cursor: 0 });
    expect(await take(stream, 20, false)).toEqual(range(1, 20));
    expect(stream.cursor).toBe(0);
    expect(relay.sockets.length).toBeGreaterThan(1);
    // Nothing acknowledged: every resume asked for the events after cursor 0 again, and the copies were dropped.
    expect(relay.sockets.every((s) => s.cursor === 0)).toBe(true);
    expect(stream.counters.duplicates).toBeGreaterThan(0);
  });

  it('skips message types it does not know and delivers #info, which has no seq', async () => {
    const relay = new FakeRelay();
    relay.autoSend = false;
    const stream = start(relay, new FakeTimers());
    relay.last.send(frame({ op: 1, t: '#info' }, { name: 'OutdatedCursor', message: 'Possibly missing events' }));
    relay.last.send(frame({ op: 1, t: '#labels' }, { seq: 1 }));
    relay.last.send(commitFrame(2, ALICE, []));
    const it = stream[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual({
      type: 'info',
      name: 'OutdatedCursor',
      message: 'Possibly missing events',
    });
    expect((await it.next()).value).toMatchObject({ type: 'commit', seq: 2 });
    expect(stream.counters).toMatchObject({ received: 3, skipped: 1 });
  });

  it('ends with REPO_STREAM_ERROR on FutureCursor, and reconnects after ConsumerTooSlow', async () => {
    const relay = new FakeRelay();
    relay.autoSend = false;
    const timers = new FakeTimers();
    const slow = start(relay, timers, { cursor: 0 });
    relay.last.send(errorFrame('ConsumerTooSlow', 'Stream consumer too slow'));
    expect(relay.sockets[0]!.closed).toBe(true);
    expect(timers.pending.size).toBe(1);
    expect(slow.lastError).toMatchObject({ code: 'REPO_STREAM_ERROR', details: { error: 'ConsumerTooSlow' } });
    timers.fire();
    expect(relay.sockets).toHaveLength(2);

    const future = start(relay, new FakeTimers(), { cursor: 99 });
    relay.last.send(errorFrame('FutureCursor', 'Cursor in the future.'));
    const it = future[Symbol.asyncIterator]();
    await expect(it.next()).rejects.toMatchObject({
      code: 'REPO_STREAM_ERROR',
      message: `the repo event stream at ${SERVICE} sent FutureCursor: Cursor in the future.`,
    });
    expect(await it.next()).toEqual({ done: true, value: undefined });
    expect(relay.last.closed).toBe(true);
  });

  it('ends with REPO_STREAM_FRAME_INVALID on a frame it cannot read, rather than skip an event', async () => {
    const relay = new FakeRelay();
    relay.autoSend = false;
    const stream = start(relay, new FakeTimers());
    relay.last.send(new Uint8Array([0xa2, 0x01]));
    await expect(take(stream, 1)).rejects.toMatchObject({ code: 'REPO_STREAM_FRAME_INVALID' });
    const text = start(relay, new FakeTimers());
    relay.last.send('{"op":1}');
    await expect(take(text, 1)).rejects.toMatchObject({ code: 'REPO_STREAM_FRAME_INVALID' });
  });

  it('gives up with REPO_STREAM_UNAVAILABLE after maxAttempts failed connections in a row', async () => {
    const relay = new FakeRelay();
    relay.autoSend = false;
    const timers = new FakeTimers();
    const stream = start(relay, timers, { maxAttempts: 2 });
    relay.last.drop();
    timers.fire();
    relay.last.drop();
    timers.fire();
    relay.last.drop();
    expect(timers.pending.size).toBe(0);
    const err = await take(stream, 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RepoStreamError);
    expect(err).toMatchObject({ code: 'REPO_STREAM_UNAVAILABLE' });
    expect((err as Error).message).toBe(`the repo event stream at ${SERVICE} could not be reached in 2 attempts`);
    expect(relay.sockets).toHaveLength(3);
  });

  it('close() ends a waiting consumer, cancels the reconnect timer and closes the socket', async () => {
    const relay = new FakeRelay();
    relay.autoSend = false;
    const timers = new FakeTimers();
    const stream = start(relay, timers);
    const waiting = stream[Symbol.asyncIterator]().next();
    relay.last.drop();
    expect(timers.pending.size).toBe(1);
    await stream.close();
    expect(await waiting).toEqual({ done: true, value: undefined });
    expect(timers.pending.size).toBe(0);
    expect(relay.open()).toHaveLength(0);

    // Messages still in the buffer are not delivered after close(): the next reader resumes from the cursor.
    const full = start(relay, timers, { cursor: 0 });
    relay.last.send(commitFrame(1, ALICE, []));
    relay.last.send(commitFrame(2, ALICE, []));
    expect(full.counters.buffered).toBe(2);
    await full.close();
    expect(full.counters.buffered).toBe(0);
    expect(await full[Symbol.asyncIterator]().next()).toEqual({ done: true, value: undefined });

    const live = start(relay, timers);
    await live.close();
    expect(relay.last.closed).toBe(true);
    relay.last.on.close(1006, ''); // a late report from a closed socket changes nothing
    expect(timers.pending.size).toBe(0);
    expect(relay.sockets).toHaveLength(3);
  });
});
