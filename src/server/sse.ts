// Server-sent events of log entries. Each message: `id: <seq>`, `event: event`, `data: <RecordedEvent JSON>`.
//
// Bounded by construction: every client has a cursor and is fed from the log a page at a time (the port's paged
// reads, readAll or readStream from the cursor), the next page only once the socket has taken the last one
// (back-pressure), so a catch-up from `afterSeq=0` never holds more than a page per client, whatever the log's
// size. A client that stays backed up for `slowClientMs` is dropped (it reconnects with Last-Event-ID and resumes
// where it was). The number of open streams is capped: one past the cap gets 503 with Retry-After. New commits
// (also other processes') wake idle clients through one shared store subscription, started at the log's head.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { httpStatusOf } from '../domain/error-codes.ts';
import type { RecordedEvent } from '../domain/events.ts';
import type { EventStorePort, Subscription } from '../index.ts';
import { readLogPage, readStreamPage } from '../inspect/actor-pages.ts';
import { SECURITY_HEADERS, sendJson } from './http.ts';

export const KEEPALIVE_MS = 15_000;

export interface SseOptions {
  /** How often to look for commits by other processes (ms). */
  pollMs?: number;
  /** Events read and written per step of a client's feed. */
  pageSize?: number;
  /** Open streams at most; one more gets 503. */
  maxClients?: number;
  /** A client whose socket does not drain for this long is dropped (ms). */
  slowClientMs?: number;
}

export const SSE_DEFAULTS: Required<SseOptions> = { pollMs: 200, pageSize: 200, maxClients: 64, slowClientMs: 10_000 };

export interface SseHub {
  /** Starts a stream: its head is sent once the client's place in the log is read; pages follow from there. */
  open(req: IncomingMessage, res: ServerResponse, options: { afterSeq?: number; stream?: string }): void;
  /** Ends every open stream (server shutdown). */
  closeAll(): void;
  readonly size: number;
  /** Clients dropped because they did not keep up (since start). */
  readonly dropped: number;
}

type Store = Pick<EventStorePort, 'subscribe' | 'readAll' | 'readStream' | 'streamVersion' | 'lastSeq'>;

/** Serialized events: what a client is sent, and the cursor after it. */
interface Page {
  text: string;
  lastSeq: number;
  count: number;
}

const PAGE_CACHE = 32;
const PAGES_PER_TURN = 4;

const message = (e: RecordedEvent): string => `id: ${e.seq}\nevent: event\ndata: ${JSON.stringify(e)}\n\n`;

/**
 * Pages of the whole log, cached. Full pages never change (the log is append-only): clients catching up from the
 * same point share one read and one serialization per page instead of repeating it each (a few recent pages are
 * kept, and a page being read is shared by the clients that ask for it meanwhile).
 */
function wholeLogPages(store: Store, pageSize: number): (afterSeq: number) => Promise<Page> {
  const pageCache = new Map<number, Page>();
  const reading = new Map<number, Promise<Page>>();
  const read = async (afterSeq: number): Promise<Page> => {
    const events = await readLogPage(store, afterSeq, pageSize);
    const page: Page = {
      text: events.map(message).join(''),
      lastSeq: events.at(-1)?.seq ?? afterSeq,
      count: events.length,
    };
    if (events.length === pageSize) {
      pageCache.set(afterSeq, page);
      if (pageCache.size > PAGE_CACHE) pageCache.delete(pageCache.keys().next().value!);
    }
    return page;
  };
  return (afterSeq) => {
    const hit = pageCache.get(afterSeq);
    if (hit) {
      pageCache.delete(afterSeq);
      pageCache.set(afterSeq, hit);
      return Promise.resolve(hit);
    }
    let pending = reading.get(afterSeq);
    if (!pending) {
      pending = read(afterSeq).finally(() => reading.delete(afterSeq));
      reading.set(afterSeq, pending);
    }
    return pending;
  };
}

/**
 * Catch-up work, taken in turns: at most PAGES_PER_TURN pages per turn of the event loop, round robin over the
 * clients that have more to read, so a crowd catching up never keeps the server from its other requests.
 */
function turns(): (fn: () => void) => void {
  const ready: (() => void)[] = [];
  let turnScheduled = false;
  const turn = (): void => {
    turnScheduled = false;
    for (let i = 0; i < PAGES_PER_TURN && ready.length > 0; i++) ready.shift()!();
    if (ready.length > 0 && !turnScheduled) {
      turnScheduled = true;
      setImmediate(turn);
    }
  };
  return (fn) => {
    ready.push(fn);
    if (!turnScheduled) {
      turnScheduled = true;
      setImmediate(turn);
    }
  };
}

/** Sends the head of an event stream: its headers, the reconnect delay and a first comment. */
function startStream(res: ServerResponse): void {
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.write('retry: 2000\n: runlog event stream\n\n');
}

/**
 * The one subscription that wakes every client, started at the log's head read before any client's first page:
 * every commit after it wakes the clients, and everything up to it is read by their own catch-up.
 */
function wakeOnCommit(store: Store, pollMs: number, wake: () => void): { watch(): Promise<unknown>; unwatch(): void } {
  let watching: Promise<Subscription> | null = null;
  return {
    watch() {
      const w = (watching ??= store.lastSeq().then((head) =>
        store.subscribe(
          {
            from: head + 1,
            pollMs,
            onError: () => {
              if (watching === w) watching = null; // the log closed under it (shutdown); a later client subscribes again
            },
          },
          wake,
        ),
      ));
      return w;
    },
    unwatch() {
      const w = watching;
      watching = null;
      void w?.then((sub) => sub.close()).catch(() => undefined);
    },
  };
}

/** What a client's feed shares with its hub: the store, the options, the shared page reads and turns. */
interface HubShared {
  store: Store;
  o: Required<SseOptions>;
  /** The open clients (a feed adds itself, and leaves when it closes). */
  clients: Set<{ wake(): void; close(): void }>;
  commits: { watch(): Promise<unknown> };
  wholeLogPage: (afterSeq: number) => Promise<Page>;
  schedule: (fn: () => void) => void;
  unwatchIfIdle: () => void;
  /** Counts a client dropped for not keeping up. */
  dropped: () => void;
}

/**
 * One client's feed: its cursor (set before the stream's head is sent), its pages read in turns and written with
 * back-pressure, the keep-alive pings, and its end (the client went away, the log closed, or it did not keep up).
 */
function feedClient(
  hub: HubShared,
  req: IncomingMessage,
  res: ServerResponse,
  options: { afterSeq?: number; stream?: string },
): void {
  const lastEventId = Number(req.headers['last-event-id']);
  const requested =
    options.afterSeq ?? (Number.isSafeInteger(lastEventId) && lastEventId >= 0 ? lastEventId : undefined);

  // The cursor: the last seq sent (the whole log), and for one stream also its last version read. Set by
  // `ready`, before the stream's head is sent: a client that saw the head sees every commit after it.
  let seq = 0;
  let version = 0;
  let busy = true;
  let missed = false;
  let queued = false;
  let waitingForDrain = false;
  let closed = false;
  let started = false;
  let slowTimer: NodeJS.Timeout | undefined;

  const nextPage = async (): Promise<Page> => {
    if (options.stream === undefined) return hub.wholeLogPage(seq);
    const events = await readStreamPage(hub.store, options.stream, { from: version + 1, to: version + hub.o.pageSize });
    if (events.length > 0) version = events[events.length - 1]!.version;
    // A stream's events up to the client's Last-Event-ID were sent before.
    const fresh = events.filter((e) => e.seq > seq);
    return { text: fresh.map(message).join(''), lastSeq: fresh.at(-1)?.seq ?? seq, count: events.length };
  };

  /** Asks for a turn (once: a client is in the queue at most once). */
  const later = (): void => {
    if (queued || closed) return;
    queued = true;
    hub.schedule(() => {
      queued = false;
      pump();
    });
  };
  const pump = (): void => {
    if (closed || waitingForDrain) return;
    if (busy) {
      missed = true; // a wake while a page is read: one more turn follows it
      return;
    }
    busy = true;
    missed = false;
    nextPage().then(
      (page) => {
        busy = false;
        if (!closed) deliver(page);
      },
      () => {
        busy = false;
        close(true); // the log closed under us (shutdown)
      },
    );
  };
  const deliver = (page: Page): void => {
    seq = page.lastSeq;
    if (page.text) res.write(page.text);
    if (res.writableNeedDrain) {
      // The socket holds a page it has not sent: wait for it, and drop a client that never takes it.
      waitingForDrain = true;
      slowTimer = setTimeout(() => {
        hub.dropped();
        close(true);
      }, hub.o.slowClientMs);
      res.once('drain', () => {
        clearTimeout(slowTimer);
        waitingForDrain = false;
        later();
      });
    } else if (page.count === hub.o.pageSize || missed) later(); // more to catch up on: after the other clients' turns
  };

  const ping = setInterval(() => {
    if (started && !closed && !waitingForDrain) res.write(': ping\n\n');
  }, KEEPALIVE_MS);
  ping.unref();

  const client = { wake: later, close: () => close(false) };
  const close = (destroy: boolean): void => {
    if (closed) return;
    closed = true;
    clearInterval(ping);
    clearTimeout(slowTimer);
    hub.clients.delete(client);
    hub.unwatchIfIdle();
    if (destroy) res.destroy();
    else if (!res.writableEnded) res.end();
  };
  hub.clients.add(client);
  req.on('close', () => close(false));
  res.on('error', () => close(true));
  // Where the client starts (the head, unless it named a position), then the stream's head, then the first page.
  const ready = async (): Promise<void> => {
    const [, head, streamAt] = await Promise.all([
      hub.commits.watch(),
      requested === undefined ? hub.store.lastSeq() : requested,
      options.stream !== undefined && requested === undefined ? hub.store.streamVersion(options.stream) : 0,
    ]);
    seq = head;
    version = streamAt;
  };
  ready().then(
    () => {
      if (closed) return;
      startStream(res);
      started = true;
      busy = false;
      later();
    },
    () => close(true),
  );
}

export function createSseHub(store: Store, options: SseOptions | number = {}): SseHub {
  const o = { ...SSE_DEFAULTS, ...(typeof options === 'number' ? { pollMs: options } : options) };
  const clients = new Set<{ wake(): void; close(): void }>();
  let dropped = 0;
  let wakeScheduled = false;

  // One subscription for every client: it only says "there is more"; each client reads from its own cursor.
  const wakeAll = (): void => {
    if (wakeScheduled) return;
    wakeScheduled = true;
    setImmediate(() => {
      wakeScheduled = false;
      for (const c of clients) c.wake();
    });
  };
  const commits = wakeOnCommit(store, o.pollMs, wakeAll);
  const unwatchIfIdle = (): void => {
    if (clients.size === 0) commits.unwatch();
  };

  const wholeLogPage = wholeLogPages(store, o.pageSize);
  const schedule = turns();
  const shared: HubShared = {
    store,
    o,
    clients,
    commits,
    wholeLogPage,
    schedule,
    unwatchIfIdle,
    dropped: () => {
      dropped += 1;
    },
  };

  return {
    get size() {
      return clients.size;
    },
    get dropped() {
      return dropped;
    },
    open(req, res, options) {
      if (clients.size >= o.maxClients) {
        sendJson(
          res,
          httpStatusOf('TOO_MANY_STREAMS'),
          {
            error: {
              code: 'TOO_MANY_STREAMS',
              message: `${o.maxClients} event streams are open, the most this server serves; retry later`,
            },
          },
          { 'retry-after': '5' },
        );
        return;
      }
      feedClient(shared, req, res, options);
    },
    closeAll() {
      for (const c of [...clients]) c.close();
    },
  };
}
