// The owner and follower roles of a remote `logs --follow` (supervisor/cluster/remote-follow.ts) over an in-memory bus and a
// hand-driven clock: lines in order, a clean end, a cancel, renewals that stop, a lease that moved, an owner gone
// quiet, a gap, a broken connection, and an owner that does not run the instance.
import { describe, expect, it } from 'vitest';
import { encodeFrame } from '../../../src/domain/follow-frames.ts';
import type { LogLine } from '../../../src/domain/log-line.ts';
import { RunlogError } from '../../../src/domain/errors.ts';
import {
  ABANDON_MS,
  FollowOwner,
  followRemote,
  HEARTBEAT_MS,
  LOST_AFTER_MS,
  MAX_WAITING_LINES,
  type Timers,
} from '../../../src/supervisor/cluster/remote-follow.ts';
import type { FollowBus } from '../../../src/store/postgres/follow-channel.ts';

/** Channels in memory; a notify is delivered after the current turn (as a notification arrives later). */
class FakeBus implements FollowBus {
  readonly channels = new Map<string, { on: (p: string) => void; broken?: () => void }>();
  readonly sent: { channel: string; payload: string }[] = [];
  async listen(channel: string, on: (p: string) => void, broken?: () => void) {
    this.channels.set(channel, { on, ...(broken ? { broken } : {}) });
    return () => void this.channels.delete(channel);
  }
  async notify(channel: string, payload: string) {
    this.sent.push({ channel, payload });
    await Promise.resolve();
    this.channels.get(channel)?.on(payload);
  }
  breakAll() {
    for (const [ch, l] of [...this.channels]) {
      if (!l.broken) continue;
      this.channels.delete(ch);
      l.broken();
    }
  }
}

class FakeTimers implements Timers {
  now = 0;
  private readonly tasks = new Set<{ at: number; every: number | null; fn: () => void }>();
  nowMs = () => this.now;
  setInterval(fn: () => void, ms: number) {
    const t = { at: this.now + ms, every: ms, fn };
    this.tasks.add(t);
    return { clear: () => void this.tasks.delete(t) };
  }
  setTimeout(fn: () => void, ms: number) {
    const t = { at: this.now + ms, every: null, fn };
    this.tasks.add(t);
    return { clear: () => void this.tasks.delete(t) };
  }
  /** Moves the clock on in 50 ms steps, running what falls due (and letting promises settle between). */
  async advance(ms: number) {
    const end = this.now + ms;
    while (this.now < end) {
      this.now = Math.min(end, this.now + 50);
      for (const t of [...this.tasks]) {
        if (t.at > this.now) continue;
        if (t.every === null) this.tasks.delete(t);
        else t.at += t.every;
        t.fn();
      }
      await settle();
    }
  }
}

const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

/** A local follow the test feeds: push lines, end it. */
function source() {
  const queue: (LogLine | null)[] = [];
  let wake: (() => void) | null = null;
  let returned = false;
  return {
    push(l: LogLine | null) {
      queue.push(l);
      wake?.();
    },
    get returned() {
      return returned;
    },
    iterable: {
      [Symbol.asyncIterator]: () => ({
        async next(): Promise<IteratorResult<LogLine>> {
          while (queue.length === 0) await new Promise<void>((r) => (wake = r));
          const l = queue.shift()!;
          return l === null ? { done: true, value: undefined } : { done: false, value: l };
        },
        async return(): Promise<IteratorResult<LogLine>> {
          returned = true;
          return { done: true, value: undefined };
        },
      }),
    } as AsyncIterable<LogLine>,
  };
}

const line = (n: number): LogLine => ({ stream: 'stdout', line: `tick ${n}`, at: '2026-12-02T00:00:00.000Z' });

async function setup(o: { owns?: () => boolean; running?: boolean; read?: boolean } = {}) {
  const bus = new FakeBus();
  const timers = new FakeTimers();
  const src = source();
  const logs: string[] = [];
  const owner = new FollowOwner({
    bus,
    channel: 'ctl-a',
    node: 'a',
    owns: o.owns ?? (() => true),
    open: (id) => {
      if (o.running === false) throw new RunlogError('NOT_FOUND', `no live instance ${id}`);
      return src.iterable;
    },
    timers,
    log: (m) => logs.push(m),
  });
  await owner.start();
  const got: LogLine[] = [];
  let outcome: 'running' | 'ended' | Error = 'running';
  const it = followRemote({ bus, node: 'b', timers }, 'a', 'ctl-a', 'i1')[Symbol.asyncIterator]();
  if (o.read !== false)
    void (async () => {
      try {
        for (;;) {
          const n = await it.next();
          if (n.done) break;
          got.push(n.value);
        }
        outcome = 'ended';
      } catch (err) {
        outcome = err as Error;
      }
    })();
  await settle();
  return {
    bus,
    timers,
    src,
    owner,
    logs,
    got,
    it,
    outcome: () => outcome,
    followChannel: () => [...bus.channels.keys()].find((c) => c.startsWith('rlff_'))!,
  };
}

describe('remote follow', () => {
  it('streams the lines in order through heartbeats, and ends cleanly with the instance', async () => {
    const s = await setup();
    expect(s.owner.active()).toHaveLength(1);
    for (let n = 1; n <= 5; n++) s.src.push(line(n));
    await s.timers.advance(100);
    expect(s.got.map((l) => l.line)).toEqual(['tick 1', 'tick 2', 'tick 3', 'tick 4', 'tick 5']);
    // Quiet for a long while: heartbeats and renewals keep both sides going.
    await s.timers.advance(LOST_AFTER_MS * 3);
    expect(s.outcome()).toBe('running');
    expect(s.owner.active()).toHaveLength(1);
    s.src.push(line(6));
    s.src.push(null);
    await s.timers.advance(100);
    expect(s.got.map((l) => l.line).at(-1)).toBe('tick 6');
    expect(s.outcome()).toBe('ended');
    expect(s.owner.active()).toEqual([]);
    expect(s.logs.at(-1)).toMatch(/ended \(exited\)/);
  });

  it('the consumer going away cancels: the owner stops publishing and lets go of the local follow', async () => {
    const s = await setup();
    s.src.push(line(1));
    await s.timers.advance(100);
    await s.it.return!();
    await s.timers.advance(100);
    expect(s.owner.active()).toEqual([]);
    expect(s.src.returned).toBe(true);
    const sent = s.bus.sent.length;
    s.src.push(line(2));
    await s.timers.advance(HEARTBEAT_MS * 3);
    expect(s.bus.sent.filter((m) => m.channel.startsWith('rlff_'))).toHaveLength(
      s.bus.sent.slice(0, sent).filter((m) => m.channel.startsWith('rlff_')).length,
    );
  });

  it('renewals that stop (the follower gone) end the follow on the owner: nothing more is published', async () => {
    const s = await setup();
    // The follower vanishes without a word: its channel and its renewals are gone.
    s.bus.channels.delete(s.followChannel());
    const renewals = () => s.bus.sent.filter((m) => m.channel === 'ctl-a' && m.payload.includes('"renew"'));
    (s.bus as unknown as { notify: FollowBus['notify'] }).notify = async (channel, payload) => {
      if (channel === 'ctl-a') return; // nothing from the follower reaches the owner any more
      s.bus.sent.push({ channel, payload });
    };
    expect(renewals().length).toBe(0);
    await s.timers.advance(ABANDON_MS + HEARTBEAT_MS + 100);
    expect(s.owner.active()).toEqual([]);
    expect(s.owner.abandoned).toBe(1);
    const after = s.bus.sent.length;
    s.src.push(line(1));
    await s.timers.advance(HEARTBEAT_MS * 3);
    expect(s.bus.sent.length).toBe(after);
  });

  it('an owner gone quiet ends the follow with FOLLOW_LOST', async () => {
    const s = await setup();
    // A kill -9 of the owner: nothing it would send arrives any more.
    const follow = s.followChannel();
    const notify = s.bus.notify.bind(s.bus);
    s.bus.notify = async (channel, payload) => (channel === follow ? undefined : notify(channel, payload));
    await s.timers.advance(LOST_AFTER_MS - 1000);
    expect(s.outcome()).toBe('running');
    await s.timers.advance(2000);
    expect(s.outcome()).toMatchObject({ code: 'FOLLOW_LOST' });
    expect((s.outcome() as Error).message).toContain('follow again');
  });

  it('an owner that stops cleanly tells its followers at once', async () => {
    const s = await setup();
    s.src.push(line(1));
    await s.timers.advance(100);
    s.owner.stop();
    await settle();
    expect(s.outcome()).toMatchObject({
      code: 'FOLLOW_LOST',
      message: expect.stringContaining('node a is stopping: follow again'),
    });
    expect(s.got.map((l) => l.line)).toEqual(['tick 1']);
  });

  it('a missing packet ends the follow with FOLLOW_LOST (a stream with a hole is never shown as whole)', async () => {
    const s = await setup();
    // The owner sent hello as packet 0; a packet far ahead means some were lost.
    await s.bus.notify(s.followChannel(), encodeFrame({ t: 'lines', lines: [line(9)] }, 5)[0]!);
    await settle();
    expect(s.outcome()).toMatchObject({ code: 'FOLLOW_LOST' });
    expect(s.got).toEqual([]);
  });

  it('bad payloads on the channels are ignored', async () => {
    const s = await setup();
    await s.bus.notify('ctl-a', 'garbage');
    await s.bus.notify(s.followChannel(), '{"nope":1}');
    s.src.push(line(1));
    await s.timers.advance(100);
    expect(s.owner.bad).toBe(1);
    expect(s.got.map((l) => l.line)).toEqual(['tick 1']);
    expect(s.outcome()).toBe('running');
  });

  it("the follower's LISTEN connection broken ends it with FOLLOW_LOST", async () => {
    const s = await setup();
    s.bus.breakAll();
    await settle();
    expect(s.outcome()).toMatchObject({ code: 'FOLLOW_LOST' });
  });

  it('ownership moving ends the follow with FOLLOW_LOST saying to follow again', async () => {
    let owns = true;
    const s = await setup({ owns: () => owns });
    s.src.push(line(1));
    await s.timers.advance(100);
    owns = false;
    await s.timers.advance(HEARTBEAT_MS + 100);
    expect(s.outcome()).toMatchObject({ code: 'FOLLOW_LOST' });
    expect((s.outcome() as Error).message).toMatch(/no longer owned by node a: follow again/);
    expect(s.got.map((l) => l.line)).toEqual(['tick 1']);
  });

  it('an owner that does not run the instance answers with its typed error', async () => {
    const s = await setup({ running: false });
    await s.timers.advance(100);
    expect(s.outcome()).toMatchObject({ code: 'NOT_FOUND' });
    const t = await setup({ owns: () => false });
    await t.timers.advance(100);
    expect(t.outcome()).toMatchObject({ code: 'FOLLOW_LOST' });
  });

  it('a client that does not read ends the follow past a bound, and the owner stops publishing', async () => {
    const s = await setup({ read: false });
    for (let n = 1; n <= MAX_WAITING_LINES + 600; n++) s.src.push(line(n));
    await s.timers.advance(200);
    expect(s.owner.active()).toEqual([]);
    expect(s.logs.at(-1)).toMatch(/ended \(cancelled\)/);
    await expect(s.it.next()).rejects.toMatchObject({
      code: 'FOLLOW_LOST',
      message: expect.stringContaining('read too slowly'),
    });
    expect(await s.it.next()).toEqual({ done: true, value: undefined });
  });
});
