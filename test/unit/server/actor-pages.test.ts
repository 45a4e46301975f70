// Bounded reads of an actor with a long history over the HTTP API (actor-pages.ts): its events come in pages with
// a cursor, replay and inspect start from its snapshot and read only the events after it, and a fold that is still
// long (no usable snapshot) leaves the server answering other requests while it runs.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectActor, replayActor } from '../../../src/inspect/inspection.ts';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { startServer, type RunningServer } from '../../../src/server/http-server.ts';
import { ensureToken } from '../../../src/server/token.ts';
import { writeDeepActor } from '../../support/deep-actor.ts';
import { freshDirs } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const freshDir = freshDirs('runlog-actor-pages-', 'all');

/** 100,037 events: a snapshot every 100 up to v100,000, then 37 events after the newest one. */
const EVENTS = 100_037;
/** The actor with no snapshot: long enough that its fold spans many chunks (actor-pages.ts, FOLD_CHUNK). */
const STALE_EVENTS = 20_000;

describe('per-actor reads of a 100k-event actor', () => {
  let rl: Runlog;
  let server: RunningServer;
  let token: string;
  /** The version ranges the server read from the log, per stream, since the last reset. */
  let reads: { stream: string; from: number; to: number }[] = [];

  const api = async (path: string): Promise<any> => {
    const res = await fetch(new URL(path, server.url), { headers: { authorization: `Bearer ${token}` } });
    const body = await res.json();
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
    return body;
  };

  beforeAll(async () => {
    const home = freshDir();
    const db = join(home, 'runlog.db');
    writeDeepActor(db, 'inst_deep', EVENTS, { snapshots: true });
    writeDeepActor(db, 'inst_stale', STALE_EVENTS, { snapshots: false });
    rl = await createRunlog({ home, supervise: false });
    token = ensureToken(home).token;
    // Each read of a stream is recorded once it ends, as the versions it gave.
    const readStream = runlogInternals(rl).store.readStream.bind(runlogInternals(rl).store);
    runlogInternals(rl).store.readStream = (stream, options = {}) =>
      (async function* () {
        let first: number | undefined;
        let last = 0;
        try {
          for await (const e of readStream(stream, options)) {
            first ??= e.version;
            last = e.version;
            yield e;
          }
        } finally {
          if (first !== undefined) reads.push({ stream, from: first, to: last });
        }
      })();
    server = await startServer({ runlog: rl, host: '127.0.0.1', port: 0, token, pollMs: 20 });
  }, 120_000);

  afterAll(async () => {
    await server?.close();
    await rl?.close();
  });

  const eventsRead = () => reads.reduce((n, r) => n + r.to - r.from + 1, 0);

  it('gives its events in pages of the limit, and the cursor walks the whole stream once', async () => {
    const first = await api('/api/actors/inst_deep/events');
    expect(first).toMatchObject({ id: 'inst_deep', kind: 'instance', version: EVENTS, next: 1000 });
    expect(first.events.map((e: any) => e.version)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    let seen = 0;
    let pages = 0;
    for (let after: number | null = 0; after !== null; pages++) {
      const page: any = await api(`/api/actors/inst_deep/events?after=${after}&limit=1000`);
      expect(page.events.length).toBeLessThanOrEqual(1000);
      expect(page.events[0].version).toBe(after + 1);
      expect(page.events.at(-1).version).toBe(after + page.events.length);
      seen += page.events.length;
      after = page.next;
    }
    expect({ seen, pages }).toEqual({ seen: EVENTS, pages: 101 });
    const small = await api('/api/actors/inst_deep/events?after=100000&limit=7');
    expect(small.events.map((e: any) => e.version)).toEqual([
      100_001, 100_002, 100_003, 100_004, 100_005, 100_006, 100_007,
    ]);
    expect(small.next).toBe(100_007);
    const bounded = await api('/api/actors/inst_deep/events?from=10&to=12&limit=2');
    expect([bounded.events.map((e: any) => e.version), bounded.next]).toEqual([[10, 11], 11]);
    const rest = await api(`/api/actors/inst_deep/events?from=10&to=12&limit=2&after=${bounded.next}`);
    expect([rest.events.map((e: any) => e.version), rest.next]).toEqual([[12], null]);
  });

  it('refuses a limit over 1000 or below 1 with a typed error', async () => {
    for (const q of ['limit=1001', 'limit=0', 'after=-1']) {
      const res = await fetch(new URL(`/api/actors/inst_deep/events?${q}`, server.url), {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.status, q).toBe(400);
      expect(((await res.json()) as any).error.code).toBe('INVALID_REQUEST');
    }
  });

  it('inspects it from its newest snapshot: reads its first event and the 37 after the snapshot', async () => {
    reads = [];
    const view = await api('/api/actors/inst_deep');
    expect(reads.filter((r) => r.stream === 'instance-inst_deep')).toEqual([
      { stream: 'instance-inst_deep', from: 100_001, to: EVENTS },
      { stream: 'instance-inst_deep', from: 1, to: 1 },
    ]);
    const { supervision: _s, traceUrl: _t, ...rest } = view;
    expect(rest).toEqual(JSON.parse(JSON.stringify(await inspectActor(runlogInternals(rl).store, 'inst_deep'))));
  });

  it('replays it from the snapshot at or before the asked version, and a page of steps from the snapshot before the page', async () => {
    reads = [];
    const at = await api('/api/actors/inst_deep/replay?to=50050&steps=none');
    expect(reads).toEqual([{ stream: 'instance-inst_deep', from: 50_001, to: 50_050 }]);
    expect(at).toMatchObject({ to: 50_050, from: 50_000, version: EVENTS, steps: [], next: null });

    reads = [];
    const page = await api('/api/actors/inst_deep/replay?after=99050&limit=1000&steps=brief');
    expect(page.steps.map((s: any) => s.version)).toEqual(Array.from({ length: 987 }, (_, i) => 99_051 + i));
    expect(page.next).toBeNull();
    expect(eventsRead()).toBe(EVENTS - 99_000);
    expect(reads[0]).toEqual({ stream: 'instance-inst_deep', from: 99_001, to: 99_050 });

    // The state at the end is inspect's (snapshot and tail); each step of the page is a tool grant or revoke in 'running'.
    expect({ state: page.state, context: page.context }).toEqual(
      JSON.parse(
        JSON.stringify({
          state: 'running',
          context: (await inspectActor(runlogInternals(rl).store, 'inst_deep')).context,
        }),
      ),
    );
    expect(
      page.steps.every(
        (s: any) =>
          s.from === 'running' &&
          s.to === 'running' &&
          s.accepted &&
          s.event.type === (s.version % 2 ? 'instance.tool-revoked' : 'instance.tool-granted'),
      ),
    ).toBe(true);
    // Against the old whole replay, on a stretch short enough to fold from the first event here.
    const early = await api('/api/actors/inst_deep/replay?after=150&limit=60&to=300');
    const whole = await replayActor(runlogInternals(rl).store, 'inst_deep', 300);
    expect({ state: early.state, context: early.context, steps: early.steps, next: early.next }).toEqual(
      JSON.parse(
        JSON.stringify({ state: whole.state, context: whole.context, steps: whole.steps.slice(150, 210), next: 210 }),
      ),
    );

    const first = await api('/api/actors/inst_deep/replay');
    expect([first.steps.length, first.steps[0].version, first.next, first.to]).toEqual([1000, 1, 1000, EVENTS]);
  });

  it('answers /api/health while a long fold of an actor with no usable snapshot is still running', async () => {
    const order: string[] = [];
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const readStream = runlogInternals(rl).store.readStream;
    runlogInternals(rl).store.readStream = (stream, options) => {
      if (stream === 'instance-inst_stale') started();
      return readStream.call(runlogInternals(rl).store, stream, options);
    };
    try {
      const long = api('/api/actors/inst_stale').then((v) => (order.push('inspect'), v));
      await running;
      const health = await api('/api/health');
      order.push('health');
      expect(health.ok).toBe(true);
      const view = await long;
      expect(view).toMatchObject({ id: 'inst_stale', version: STALE_EVENTS, state: 'running' });
      expect(order).toEqual(['health', 'inspect']);
    } finally {
      runlogInternals(rl).store.readStream = readStream;
    }
  });
});
