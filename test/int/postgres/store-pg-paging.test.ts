// A supervisor on PostgreSQL holds live actors, not the fleet's history (postgres/host-store.ts, log-copy.ts): against the
// real server, a log of ended actors (the golden histories, written through the real store with the real actors
// projection) and one live actor. Ended actors' events are not held in the supervisor's memory, yet every read of
// them is complete: the store reads what it does not hold from the database (copy-reads.ts) — an ended actor's
// history, the log from its first position, a subscription from there — and answers exactly as the whole copy
// (what every supervisor held before) does, through the port, the library, the HTTP API and `runlog
// events/inspect/replay/export --store`; the live actor is still held and rehydrates.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { ActorHost } from '../../../src/supervisor/host/actor-host.ts';
import { actorsProjection, ACTORS_PROJECTION } from '../../../src/supervisor/host/actors-projection.ts';
import { createBus } from '../../../src/supervisor/host/bus.ts';
import { inspectActor, replayActor } from '../../../src/inspect/inspection.ts';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { machines, stateName } from '../../../src/machines/runtime.ts';
import { startServer, type RunningServer } from '../../../src/server/http-server.ts';
import { archiveEndedPg } from '../../../src/store/postgres/archive.ts';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import { PgHostStore, splitStoreUrl } from '../../../src/store/postgres/host-store.ts';
import { collect } from '../../../src/store/port.ts';
import { openInspectionLog } from '../../../src/cli/inspection-log.ts';
import { runCli } from '../../support/cli-process.ts';
import { endedHistories, writeEndedActors, type EndedActor } from '../../support/pg-ended-log.ts';
import { testSchema, usePostgres } from '../../support/postgres.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const pgt = usePostgres();
const opened: { close(): unknown }[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const o of opened.reverse()) await o.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const jsonLines = (text: string): unknown[] =>
  text
    .split('\n')
    .filter((l) => l.trim().length > 0)
    .map((l) => JSON.parse(l) as unknown);
/** What a value looks like once sent as JSON (the API's and the CLI's answers are JSON). */
const asJson = (v: unknown): unknown => JSON.parse(JSON.stringify(v));

/** The first two events of a golden instance history (requested, spawned): an instance that has not ended. */
async function writeLiveInstance(url: string, id: string): Promise<string> {
  const h = endedHistories().find((x) => x.header.kind === 'instance' && x.events[0]!.type === 'instance.requested')!;
  const split = splitStoreUrl(url);
  const store = await PgEventStore.open({ url: split.url, schema: split.schema!, projections: [actorsProjection()] });
  try {
    const events = h.events.slice(0, 2).map((e) => ({
      type: e.type,
      at: e.at,
      data: JSON.parse(JSON.stringify(e.data).replaceAll(h.header.id, id)) as Record<string, unknown>,
      meta: e.meta,
    }));
    await store.appendToStream(`instance-${id}`, events, { expectedVersion: 'no-stream' });
  } finally {
    await store.close();
  }
  return `instance-${id}`;
}

/** How many times the store went to the database for events (its event store's reads), while `fn` ran. */
async function databaseReads<T>(store: PgHostStore, fn: () => Promise<T>): Promise<{ result: T; reads: number }> {
  const stream = vi.spyOn(store.pg, 'readStream');
  const all = vi.spyOn(store.pg, 'readAll');
  try {
    const result = await fn();
    return { result, reads: stream.mock.calls.length + all.mock.calls.length };
  } finally {
    stream.mockRestore();
    all.mockRestore();
  }
}

/** Every event a subscription from `from` delivers up to the store's head, in order; then it is closed. */
async function subscribed(store: PgHostStore, from: number): Promise<{ events: RecordedEvent[]; position: number }> {
  const head = await store.lastSeq();
  const events: RecordedEvent[] = [];
  const sub = store.subscribe({ from, pollMs: 20 }, (e) => void events.push(e));
  await expect.poll(() => sub.position, { timeout: 60_000 }).toBe(head);
  await sub.close();
  return { events, position: sub.position };
}

describe('the PostgreSQL supervisor pages ended actors out of memory, and its reads stay complete', () => {
  it(
    'holds live actors and recent events only; ' +
      'every ended history and the log from its start are read whole from the database (port, library, API, CLI)',
    { timeout: 300_000 },
    async () => {
      const store = `${pgt.url}?schema=${testSchema('paging')}`;
      const early = await writeEndedActors(store, 40, { prefix: 'pgpage_a' });
      const liveStream = await writeLiveInstance(store, 'pgpage_live');
      const late = await writeEndedActors(store, 40, { prefix: 'pgpage_b' });
      const ended: EndedActor[] = [...early, ...late];
      const total = ended.reduce((n, a) => n + a.events, 0) + 2;

      // Before: the whole copy (what every supervisor held, and what one-shot readers still hold).
      const whole = await PgHostStore.open({ url: store, pollMs: 0, maxConnections: 2 });
      opened.push(whole);
      expect(whole.heldEvents).toBe(total);
      const wholeLog = await collect(whole.readAll());
      expect(wholeLog).toHaveLength(total);
      // The supervisor's store, with a window of the newest 50 positions.
      const paged = await PgHostStore.open({
        url: store,
        pollMs: 0,
        maxConnections: 2,
        projections: [actorsProjection()],
        actorRows: { projection: ACTORS_PROJECTION },
        pageOut: { keepRecent: 50 },
      });
      opened.push(paged);

      // What it holds: the live actor (old as its events are) and the newest positions; no early ended actor.
      expect(paged.heldEvents).toBeLessThanOrEqual(50 + 2);
      expect(paged.heldEvents).toBeLessThan(total / 4);
      const held = paged.heldEvents;
      expect(await databaseReads(paged, () => collect(paged.readStream(liveStream)))).toEqual({
        result: await collect(whole.readStream(liveStream)),
        reads: 0,
      });
      // An ended actor's history and the log from its first position: whole, read from the database.
      const first = early[0]!;
      expect(await databaseReads(paged, () => collect(paged.readStream(first.stream)))).toEqual({
        result: await collect(whole.readStream(first.stream)),
        reads: 1,
      });
      expect(await collect(paged.readStream(first.stream, { from: 2, to: 3 }))).toEqual(
        await collect(whole.readStream(first.stream, { from: 2, to: 3 })),
      );
      const fromStart = await databaseReads(paged, () => collect(paged.readAll()));
      expect(fromStart.result).toEqual(wholeLog);
      expect(fromStart.reads).toBeGreaterThan(0);
      expect(await collect(paged.readAll({ from: 1, limit: 10 }))).toEqual(wholeLog.slice(0, 10));
      expect(await collect(paged.readAll({ from: 38, limit: 20 }))).toEqual(wholeLog.slice(37, 57));
      // The newest positions come from memory.
      const tail = wholeLog.at(-10)!.seq;
      expect(await databaseReads(paged, () => collect(paged.readAll({ from: tail })))).toEqual({
        result: wholeLog.slice(-10),
        reads: 0,
      });
      // A subscription from the log's start delivers every event once, in order (its early pages from the database).
      expect(await subscribed(paged, 1)).toEqual({ events: wholeLog, position: wholeLog.at(-1)!.seq });
      // Nothing read from the database stays in memory.
      expect(paged.heldEvents).toBe(held);
      // What ps, status and resolveActor need is all there.
      expect(await paged.listActors({ all: true })).toEqual(await whole.listActors({ all: true }));
      expect(await paged.listActors()).toEqual(await whole.listActors());
      expect(await paged.listStreams()).toEqual(await whole.listStreams());
      for (const a of ended) expect(await paged.streamVersion(a.stream)).toBe(a.events);

      // The live actor rehydrates from it (a host with no effects: what start-up reads).
      const host = new ActorHost({ store: paged, reconnecting: paged, bus: createBus(), machines, effects: null });
      const live = await host.rehydrate();
      expect(live.map((a) => a.stream)).toEqual([liveStream]);
      expect(stateName(live[0]!.snapshot)).toBe((await inspectActor(whole, 'pgpage_live')).state);
      expect(await inspectActor(paged, 'pgpage_live')).toEqual(await inspectActor(whole, 'pgpage_live'));

      // The library's queries of ended actors answer as the whole copy's.
      for (const a of [first, early[17]!, late[39]!]) {
        expect(await inspectActor(paged, a.id)).toEqual(await inspectActor(whole, a.id));
        expect(await replayActor(paged, a.id)).toEqual(await replayActor(whole, a.id));
      }
      // A dispatch to an ended, paged-out actor reads its history: the machine decides as before (the host here
      // supervises no lease, so the refusal is recorded like on a single supervisor).
      const before = await whole.streamVersion(early[3]!.stream);
      await expect(
        host.dispatchExternal(early[3]!.kind, early[3]!.id, { type: `${early[3]!.kind}.nonsense`, data: {} }),
      ).resolves.toMatchObject({ accepted: false });
      expect(await paged.streamVersion(early[3]!.stream)).toBe(before + 1);
      expect((await collect(paged.readStream(early[3]!.stream, { from: before + 1 })))[0]!.type).toBe(
        `${early[3]!.kind}.rejected`,
      );
      expect(await collect(paged.readStream(early[3]!.stream, { to: before }))).toEqual(
        await collect(whole.readStream(early[3]!.stream)),
      );
      await whole.poll();

      // A supervisor (createRunlog supervising as node n1, as `runlog serve --store` opens it) and its HTTP API.
      const home = mkdtempSync(join(tmpdir(), 'runlog-pgpage-'));
      dirs.push(home);
      const rl: Runlog = await createRunlog({
        home,
        store,
        node: 'n1',
        supervise: true,
        readOnly: false,
        reconcile: false,
        engineWatch: false,
        watchApps: false,
        pgKeepRecent: 50,
        log: () => undefined,
      });
      opened.push(rl);
      const supStore = runlogInternals(rl).store as PgHostStore;
      expect(supStore.heldEvents).toBeLessThan(total / 4);
      expect(await collect(supStore.readStream(first.stream))).toEqual(await collect(whole.readStream(first.stream)));
      // The library's reads of an ended actor are whole.
      expect(asJson(await rl.inspect(early[3]!.id))).toEqual(asJson(await inspectActor(whole, early[3]!.id)));
      expect(asJson(await rl.events(early[3]!.id))).toEqual(asJson(await collect(whole.readStream(early[3]!.stream))));
      expect(asJson(await rl.replay(early[3]!.id))).toEqual(asJson(await replayActor(whole, early[3]!.id)));
      await expect(rl.inspect('no-such-actor')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      const token = 'pgpage-token-0123456789abcdef';
      const server: RunningServer = await startServer({ runlog: rl, host: '127.0.0.1', port: 0, token });
      opened.push(server);
      const api = async (path: string): Promise<any> => {
        const res = await fetch(new URL(path, server.url), { headers: { authorization: `Bearer ${token}` } });
        const body = (await res.json()) as unknown;
        expect(res.status, JSON.stringify(body)).toBe(200);
        return body;
      };
      for (const a of [first, early[5]!, late[20]!]) {
        expect(await api(`/api/actors/${a.id}`)).toMatchObject(asJson(await inspectActor(whole, a.id)) as object);
        expect((await api(`/api/actors/${a.id}/events`)).events).toEqual(
          asJson(await collect(whole.readStream(a.stream))),
        );
        // A page of steps (all of them here) and where its fold started (`from`), besides the whole replay's answer.
        const replayed = await api(`/api/actors/${a.id}/replay`);
        expect(replayed).toMatchObject(asJson(await replayActor(whole, a.id)) as object);
        expect(replayed.next).toBeNull();
      }
      const wholeNow = await collect(whole.readAll());
      expect((await api('/api/events?afterSeq=0&limit=1000')).events).toEqual(asJson(wholeNow.slice(0, 1000)));
      expect((await api('/api/actors?all=true')).actors).toHaveLength(ended.length + 1);
      // The whole-log event stream from the start: its early pages are read from PostgreSQL, the rest from memory.
      const want = asJson(wholeNow) as { seq: number }[];
      const abort = new AbortController();
      const sse = await fetch(new URL('/api/events/stream?afterSeq=0', server.url), {
        headers: { authorization: `Bearer ${token}` },
        signal: abort.signal,
      });
      expect(sse.status).toBe(200);
      const got: unknown[] = [];
      let buf = '';
      const decoder = new TextDecoder();
      for await (const chunk of sse.body!) {
        buf += decoder.decode(chunk as Uint8Array, { stream: true });
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const data = buf
            .slice(0, i)
            .split('\n')
            .find((l) => l.startsWith('data: '));
          buf = buf.slice(i + 2);
          if (data) got.push(JSON.parse(data.slice(6)));
        }
        if (got.length >= want.length) break;
      }
      abort.abort();
      expect(got.slice(0, want.length)).toEqual(want);

      // The one-shot commands, by --store, give every ended actor's history in full. They open the log as a
      // supervisor does, without the recent window (inspection-log.ts): nothing of an ended actor is read at open,
      // a command reads its history from the database; `events --all` reads what memory lacks a page at a time.
      const logArgs = { home: undefined, db: undefined, store };
      const oneShot = (await openInspectionLog(logArgs)).store as PgHostStore;
      opened.push(oneShot);
      // the whole copy, now: what the commands must answer
      const ref = await PgHostStore.open({ url: store, pollMs: 0, maxConnections: 2 });
      opened.push(ref);
      expect(ref.heldEvents).toBe(await ref.pg.lastSeq());
      expect(oneShot.loadStats.eventsRead).toBe(oneShot.heldEvents);
      expect(oneShot.heldEvents).toBeLessThan(ref.heldEvents / 4);
      const cli = (args: string[]) => {
        const r = runCli([...args, '--store', store], { env: { RUNLOG_HOME: join(home, 'nowhere') } });
        expect(r.code, r.stderr).toBe(0);
        return r.stdout;
      };
      const refActors = await ref.listActors({ all: true });
      const psAll = JSON.parse(cli(['ps', '--all', '--json'])) as {
        id: string;
        version: number;
        node?: string | null;
      }[];
      expect(psAll.map((r) => [r.id, r.version])).toEqual(refActors.map((r) => [r.id, r.version]));
      expect(psAll.map((r) => r.node)).toEqual(
        await Promise.all(refActors.map(async (r) => (await ref.placement(r.stream)).node)),
      );
      for (const a of [first, early[3]!, late[39]!]) {
        const history = await collect(ref.readStream(a.stream));
        expect(jsonLines(cli(['events', a.id, '--json']))).toEqual(asJson(history));
        expect(JSON.parse(cli(['inspect', a.id, '--json']))).toMatchObject(
          asJson(await inspectActor(ref, a.id)) as object,
        );
        expect(JSON.parse(cli(['replay', a.id, '--json']))).toMatchObject({
          id: a.id,
          state: (await replayActor(ref, a.id)).state,
          version: await ref.streamVersion(a.stream),
        });
        const [header, ...exported] = jsonLines(cli(['export', a.id]));
        expect(header).toMatchObject({ runlog: 'history', id: a.id, version: await ref.streamVersion(a.stream) });
        expect(exported).toEqual(asJson(history));
      }
      const refLog = await collect(ref.readAll());
      expect(jsonLines(cli(['events', '--all', '--json']))).toEqual(asJson(refLog));
      expect(jsonLines(cli(['events', '--all', '--from', '37', '--to', '120', '--json']))).toEqual(
        asJson(refLog.filter((e) => e.seq > 37 && e.seq <= 120)),
      );
    },
  );

  // The open itself (postgres/host-store.ts load): below the recent window it reads the events of the streams it
  // holds only (the actors that have not ended, the streams that are no actor's); ended actors there are never read
  // into memory, nor named. Every read must
  // answer as a copy that read the whole log does: from memory where it holds the events, from the database
  // exactly where an ended actor's events are below the window.
  describe('open reads only what it keeps', () => {
    /**
     * A golden history renamed to `id`, appended in two parts (the first `cut` events, then the rest) when cut is
     * given; meta.node set by `sign(version)`.
     */
    async function writeHistory(
      w: PgEventStore,
      id: string,
      opts: { sign?: (version: number) => string | undefined; cut?: number } = {},
    ): Promise<{ stream: string; rest: () => Promise<void> }> {
      const h = endedHistories().find((x) => x.header.kind === 'execution')!;
      const stream = `${h.header.kind}-${id}`;
      const events = h.events.map((e, i) => {
        const node = opts.sign?.(i + 1);
        return {
          type: e.type,
          at: e.at,
          data: JSON.parse(JSON.stringify(e.data).replaceAll(h.header.id, id)) as Record<string, unknown>,
          meta: { ...e.meta, ...(node ? { node } : {}) },
        };
      });
      const cut = opts.cut ?? events.length;
      await w.appendToStream(stream, events.slice(0, cut), { expectedVersion: 'no-stream' });
      return {
        stream,
        rest: async () =>
          void (cut < events.length
            ? await w.appendToStream(stream, events.slice(cut), { expectedVersion: cut })
            : undefined),
      };
    }

    /**
     * Every read of `paged` against `whole`'s: equal, from memory where it holds the events, and from the database
     * exactly where `pagedOut(e)` says (a range that reaches a paged-out event, the log from at or below the highest one).
     */
    async function sameReads(
      paged: PgHostStore,
      whole: PgHostStore,
      pagedOut: (e: RecordedEvent) => boolean,
    ): Promise<void> {
      expect(paged.head).toBe(whole.head);
      expect(await paged.listStreams()).toEqual(await whole.listStreams());
      expect(await paged.listActors({ all: true })).toEqual(await whole.listActors({ all: true }));
      expect(await paged.readHeartbeat()).toEqual(await whole.readHeartbeat());
      const all = await collect(whole.readAll());
      const floor = Math.max(0, ...all.filter(pagedOut).map((e) => e.seq));
      expect(paged.heldEvents).toBe(all.filter((e) => !pagedOut(e)).length);
      expect(await databaseReads(paged, () => collect(paged.readAll({ from: floor + 1 })))).toEqual({
        result: all.filter((e) => e.seq > floor),
        reads: 0,
      });
      if (floor > 0) {
        const below = await databaseReads(paged, () => collect(paged.readAll({ from: floor })));
        expect(below.result).toEqual(all.filter((e) => e.seq >= floor));
        expect(below.reads).toBeGreaterThan(0);
        expect(await collect(paged.readAll())).toEqual(all);
      }
      for (const { stream, version } of await whole.listStreams()) {
        expect(await paged.streamVersion(stream)).toBe(version);
        expect(await paged.placement(stream)).toEqual(await whole.placement(stream));
        expect(await paged.snapshotAtOrBefore(stream)).toEqual(await whole.snapshotAtOrBefore(stream));
        const mine = all.filter((e) => e.stream === stream);
        for (const e of mine) {
          // From each version on: the whole rest, read from the database when that version is paged out.
          const read = await databaseReads(paged, () => collect(paged.readStream(stream, { from: e.version })));
          expect(read.result).toEqual(await collect(whole.readStream(stream, { from: e.version })));
          expect(read.reads > 0, `${stream} from v${e.version}`).toBe(pagedOut(e));
        }
      }
      for (const r of await whole.listActors({ all: true }))
        expect(await paged.getActor(r.id)).toEqual(await whole.getActor(r.id));
      // Reading all of it held nothing more in memory.
      expect(paged.heldEvents).toBe(all.filter((e) => !pagedOut(e)).length);
    }

    it(
      'never reads ended actors below the window (archived ones, straddling ones, ' +
        'signed ones) and reads everything else; every read answers as the whole copy',
      { timeout: 300_000 },
      async () => {
        const store = `${pgt.url}?schema=${testSchema('pgopen')}`;
        const split = splitStoreUrl(store);
        const home = mkdtempSync(join(tmpdir(), 'runlog-pgopen-'));
        dirs.push(home);
        // Archived first (retention, postgres/archive.ts): their rows stay (archived), their events leave a hole in the positions.
        const gone = await writeEndedActors(store, 6, { prefix: 'pgopen_gone' });
        const w = await PgEventStore.open({ url: split.url, schema: split.schema!, projections: [actorsProjection()] });
        try {
          expect(
            await archiveEndedPg(w, { before: '2100-01-01T00:00:00.000Z', out: join(home, 'gone.jsonl.gz') }),
          ).toMatchObject({ actors: gone.length });
          const liveOld = await writeLiveInstance(store, 'pgopen_live');
          const other = async (stream: string, n: number, node?: string) => {
            for (let i = 0; i < n; i++)
              await w.appendToStream(stream, [{ type: 'test.noted', data: { i }, meta: node ? { node } : {} }], {
                expectedVersion: 'any',
              });
          };
          await other('sandbox-pool', 3, 'n2');
          await other('app-pgopen', 2);
          // More held streams than one read takes (1,000 streams a page), their events interleaved (a second round
          // comes last below the window, above the last ended event there): the pages' events must be merged into
          // position order.
          const many = Array.from({ length: 1100 }, (_, i) => `app-pgopen${i}`);
          const manyRound = async (round: number) => {
            const out = await w.appendMany(
              many.map((stream) => ({
                stream,
                events: [{ type: 'test.noted', data: { round } }],
                expectedVersion: 'any' as const,
              })),
            );
            expect(out.every((o) => o.ok)).toBe(true);
          };
          await manyRound(0);
          // An ended actor every event of which a node signed, and one whose last events nobody signed (its node is
          // the last signer's, as put() keeps it).
          await writeHistory(w, 'pgopen_signed', { sign: () => 'n1' });
          await writeHistory(w, 'pgopen_halfsigned', { sign: (v) => (v <= 2 ? 'n3' : undefined) });
          const below = await writeEndedActors(store, 30, { prefix: 'pgopen_old' });
          await other('placement-n1', 2, 'n1');
          // Straddling the window: its first part below, the rest inside.
          const cut = await writeHistory(w, 'pgopen_cut', { cut: 2, sign: () => 'n1' });
          await manyRound(1);
          const pageBelow = await w.lastSeq();
          await writeEndedActors(store, 5, { prefix: 'pgopen_new' });
          await other('sandbox-pool', 2);
          await cut.rest();
          await writeLiveInstance(store, 'pgopen_live2');
          const head = await w.lastSeq();
          const keepRecent = head - pageBelow;

          const whole = await PgHostStore.open({ url: store, pollMs: 0, maxConnections: 2 });
          opened.push(whole);
          const paged = await PgHostStore.open({
            url: store,
            pollMs: 0,
            maxConnections: 2,
            projections: [actorsProjection()],
            actorRows: { projection: ACTORS_PROJECTION },
            pageOut: { keepRecent },
          });
          opened.push(paged);

          const ended = new Set(
            (await whole.listActors({ all: true })).filter((r) => r.status === 'terminal').map((r) => r.stream),
          );
          const pagedOut = (e: RecordedEvent) => ended.has(e.stream) && e.seq <= pageBelow;
          const all = await collect(whole.readAll());
          const unread = all.filter(pagedOut);
          // What the open read: every event it holds, none of the ended actors' below the window (the whole copy
          // read all of them): the 30, the two signed ones, the straddling one's first part.
          expect(whole.loadStats).toMatchObject({ eventsRead: all.length });
          expect(paged.loadStats).toEqual({
            before: head,
            eventsRead: all.length - unread.length,
            requestEventsPagedOut: 0,
          });
          expect(new Set(unread.map((e) => e.stream)).size).toBe(below.length + 3);
          expect(paged.loadStats.eventsRead).toBe(paged.heldEvents);

          await sameReads(paged, whole, pagedOut);
          // Nothing of an ended actor below the window stays in memory, not its stream's version, nor its row.
          const heldStreams = new Set(all.filter((e) => !pagedOut(e)).map((e) => e.stream));
          expect(paged.heldStreams).toEqual({
            streams: heldStreams.size,
            rows: [...heldStreams].filter((s) => /^(instance|execution)-/.test(s)).length,
          });
          expect(whole.heldStreams.streams).toBe(new Set(all.map((e) => e.stream)).size);
          // The cases named: archived rows listed, no stream; the straddling actor's window part held; nodes.
          for (const a of gone) {
            expect((await paged.getActor(a.id))?.archived?.file).toBe(join(home, 'gone.jsonl.gz'));
            expect(await paged.streamVersion(a.stream)).toBe(0);
            expect(await collect(paged.readStream(a.stream))).toEqual([]);
          }
          expect(await databaseReads(paged, () => collect(paged.readStream(cut.stream, { from: 3 })))).toEqual({
            result: await collect(whole.readStream(cut.stream, { from: 3 })),
            reads: 0,
          });
          const cutWhole = await databaseReads(paged, () => collect(paged.readStream(cut.stream)));
          expect(cutWhole.result).toEqual(await collect(whole.readStream(cut.stream)));
          expect(cutWhole.reads).toBe(1);
          expect((await paged.placement('execution-pgopen_signed')).node).toBe('n1');
          expect((await paged.placement('execution-pgopen_halfsigned')).node).toBe('n3');
          expect((await paged.placement('sandbox-pool')).node).toBe('n2');
          expect(await collect(paged.readStream(liveOld))).toEqual(await collect(whole.readStream(liveOld)));
          // A history never read at open reads whole, however often it is read.
          for (let i = 0; i < 2; i++)
            expect(await collect(paged.readStream(below[7]!.stream))).toEqual(
              await collect(whole.readStream(below[7]!.stream)),
            );
        } finally {
          await w.close();
        }
      },
    );

    it(
      'each actors row is its stored document without snapshot and rev (dropped by the server), ' +
        'whatever other keys it has; a row it cannot take fails the open',
      { timeout: 300_000 },
      async () => {
        const store = `${pgt.url}?schema=${testSchema('pgrows')}`;
        const split = splitStoreUrl(store);
        const ended = await writeEndedActors(store, 4, { prefix: 'pgrows_old' });
        const live = await writeLiveInstance(store, 'pgrows_live');
        const w = await PgEventStore.open({ url: split.url, schema: split.schema!, projections: [actorsProjection()] });
        try {
          // Keys the actors projection never writes: near-misses of the dropped ones, snapshot/rev one level down
          // (kept), empty, numeric, non-ASCII, null, numbers jsonb normalises; and a document with only `rev`.
          const odd = {
            '': 1,
            '1': 'one',
            'snapshot ': 'kept',
            Snapshot: 'kept',
            revs: [1, 'rev'],
            näme: 'ünïcode ✓',
            nul: null,
            n: 1.5,
            big: 1e21,
            deep: { snapshot: { x: 1 }, rev: 'inner' },
          };
          await w.sql(
            "UPDATE projection_documents SET doc = doc || $2::jsonb WHERE projection = 'actors' AND id = $1",
            [ended[0]!.stream, JSON.stringify(odd)],
          );
          await w.sql(
            "UPDATE projection_documents SET doc = (doc - 'snapshot') " +
              '|| \'{"extra": {"a": [true, false]}}\'::jsonb ' +
              "WHERE projection = 'actors' AND id = $1",
            [ended[1]!.stream],
          );
          await w.sql(
            "UPDATE projection_documents SET doc = doc || $2::jsonb WHERE projection = 'actors' AND id = $1",
            [live, JSON.stringify(odd)],
          );
          // What a whole read gives: each stored document, parsed, less its top-level snapshot and rev.
          const stored = await w.sql<{ id: string; doc: Record<string, unknown> }>(
            "SELECT id, doc FROM projection_documents WHERE projection = 'actors'",
            [],
          );
          const expected = new Map(stored.map(({ id, doc: { snapshot: _s, rev: _r, ...row } }) => [id, row]));
          expect(expected.get(ended[0]!.stream)).toMatchObject(odd);

          const paged = await PgHostStore.open({
            url: store,
            pollMs: 0,
            maxConnections: 2,
            projections: [actorsProjection()],
            actorRows: { projection: ACTORS_PROJECTION },
            pageOut: { keepRecent: 1 },
          });
          opened.push(paged);
          // The same rows through a toRow of the caller's (the whole document read, dropped here).
          const whole = await PgHostStore.open({
            url: store,
            pollMs: 0,
            maxConnections: 2,
            actorRows: { projection: ACTORS_PROJECTION, toRow: ({ snapshot: _s, rev: _r, ...row }: any) => row },
          });
          opened.push(whole);
          expect(paged.heldEvents).toBe(2); // the live actor's two events; nothing of the ended ones
          expect(await paged.listActors({ all: true })).toHaveLength(expected.size);
          for (const row of await paged.listActors({ all: true })) {
            expect(row).toEqual(expected.get(row.stream));
            expect(Object.keys(row)).toEqual(Object.keys(expected.get(row.stream)!));
            expect(await paged.getActor(row.id)).toEqual(expected.get(row.stream));
          }
          expect(await paged.listActors({ all: true })).toEqual(await whole.listActors({ all: true }));
          expect(await paged.listActors()).toEqual([expected.get(live)]);
          expect(await paged.getActor(ended[0]!.id)).not.toHaveProperty('snapshot');
          expect(await paged.getActor(ended[1]!.id)).toMatchObject({ extra: { a: [true, false] } });

          // A row the caller's toRow refuses: the open fails with its error (not a store missing that row).
          const refused = PgHostStore.open({
            url: store,
            pollMs: 0,
            maxConnections: 2,
            actorRows: {
              projection: ACTORS_PROJECTION,
              toRow: (doc: any) => {
                if (doc.stream === ended[2]!.stream) throw new Error(`cannot take ${doc.stream}`);
                return doc;
              },
            },
          });
          await expect(refused).rejects.toThrow(`cannot take ${ended[2]!.stream}`);
        } finally {
          await w.close();
        }
      },
    );

    it(
      'events that commit while it opens are read, with their rows (the late refresh), and then it answers as the whole copy',
      { timeout: 300_000 },
      async () => {
        const store = `${pgt.url}?schema=${testSchema('pgopenrace')}`;
        const split = splitStoreUrl(store);
        await writeEndedActors(store, 60, { prefix: 'pgrace_old' });
        await writeLiveInstance(store, 'pgrace_live');
        const w = await PgEventStore.open({ url: split.url, schema: split.schema!, projections: [actorsProjection()] });
        try {
          // Opens until one open has read events committed after the head it started from (loadStats.before): a
          // writer appends ended actors (each in one transaction with its terminal row) throughout.
          let paged: PgHostStore | undefined;
          let n = 0;
          for (let attempt = 0; attempt < 20 && !paged; attempt++) {
            let writing = true;
            const writer = (async () => {
              while (writing) await writeHistory(w, `pgrace_w${String((n += 1)).padStart(4, '0')}`);
            })();
            const s = await PgHostStore.open({
              url: store,
              pollMs: 0,
              maxConnections: 2,
              projections: [actorsProjection()],
              actorRows: { projection: ACTORS_PROJECTION },
              pageOut: { keepRecent: 40 },
            });
            writing = false;
            await writer;
            if (s.head > s.loadStats.before) paged = s;
            else await s.close();
          }
          expect(paged, 'no open overlapped the writer in 20 tries').toBeDefined();
          opened.push(paged!);
          // Every actor stream it holds an event of has its row, as of that event or later (rows of the late ones
          // were read again after their events).
          const rows = await paged!.listActors({ all: true });
          for (const { stream, version } of await paged!.listStreams()) {
            if (!/^(instance|execution)-/.test(stream)) continue;
            const row = rows.find((r) => r.stream === stream);
            expect(row, stream).toBeDefined();
            expect(row!.version).toBeGreaterThanOrEqual(version);
          }
          // What committed while it opened is read whole (more than the window may have come in: what is older than
          // it is read from the database like any ended actor's).
          const late = await collect(paged!.readAll({ from: paged!.loadStats.before + 1, to: paged!.head }));
          expect(late.map((e) => e.seq)).toEqual(
            Array.from({ length: paged!.head - paged!.loadStats.before }, (_, i) => paged!.loadStats.before + 1 + i),
          );
          for (const e of late) expect(rows.find((r) => r.stream === e.stream)?.status).toBe('terminal');
          // Caught up, it answers as a whole copy read now (the window is 40 positions of the head it reached).
          await paged!.poll();
          const whole = await PgHostStore.open({ url: store, pollMs: 0, maxConnections: 2 });
          opened.push(whole);
          expect(paged!.head).toBe(whole.head);
          expect(await paged!.listStreams()).toEqual(await whole.listStreams());
          expect(await paged!.listActors({ all: true })).toEqual(await whole.listActors({ all: true }));
          expect(await collect(paged!.readAll())).toEqual(await collect(whole.readAll()));
          expect(paged!.loadStats.eventsRead).toBeLessThan(whole.heldEvents / 2);
          expect(paged!.heldEvents).toBeLessThan(whole.heldEvents / 2);
          for (const { stream, version } of await whole.listStreams()) {
            expect(await paged!.streamVersion(stream)).toBe(version);
            expect(await collect(paged!.readStream(stream))).toEqual(await collect(whole.readStream(stream)));
          }
        } finally {
          await w.close();
        }
      },
    );
  });
});
