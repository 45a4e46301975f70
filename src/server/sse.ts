// Server-sent events of log entries. Each message: `id: <seq>`, `event: event`, `data: <RecordedEvent JSON>`.
//
// Bounded by construction: every client has a cursor and is fed from the log a page at a time, the next page
// only once the socket has taken the last one (back-pressure), so a catch-up from `afterSeq=0` never holds more
// than a page per client, whatever the log's size. A client that stays backed up for `slowClientMs` is dropped
// (it reconnects with Last-Event-ID and resumes where it was). The number of open streams is capped: one past
// the cap gets 503 with Retry-After. New commits (also other processes') wake idle clients through one shared
// store subscription.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { httpStatusOf } from '../domain/error-codes.ts';
import type { RecordedEvent } from '../domain/events.ts';
// eslint-disable-next-line no-restricted-imports -- layer debt, listed in issue #13 (names/moves): reached past src/supervisor
import type { ReadableLog } from '../store/host-store.ts';
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
  open(req: IncomingMessage, res: ServerResponse, options: { afterSeq?: number; stream?: string }): void;
  /** Ends every open stream (server shutdown). */
  closeAll(): void;
  readonly size: number;
  /** Clients dropped because they did not keep up (since start). */
  readonly dropped: number;
}

type Store = Pick<ReadableLog, 'subscribe' | 'readAll' | 'read' | 'streamVersion' | 'lastSeq' | 'readAllJson' | 'readAllAsync' | 'holdsAfter'>;

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
 * kept).
 */
function wholeLogPages(store: Store, pageSize: number): (afterSeq: number) => Page {
  const pageCache = new Map<number, Page>();
  return (afterSeq) => {
    const hit = pageCache.get(afterSeq);
    if (hit) {
      pageCache.delete(afterSeq);
      pageCache.set(afterSeq, hit);
      return hit;
    }
    // The stored JSON text as it is, when the store can give it (no parse and re-serialization per event).
    const rows = store.readAllJson ? store.readAllJson(afterSeq, pageSize) : store.readAll({ afterSeq, limit: pageSize }).map((e) => ({ seq: e.seq, json: JSON.stringify(e) }));
    const page: Page = { text: rows.map((r) => `id: ${r.seq}\nevent: event\ndata: ${r.json}\n\n`).join(''), lastSeq: rows.at(-1)?.seq ?? afterSeq, count: rows.length };
    if (rows.length === pageSize) {
      pageCache.set(afterSeq, page);
      if (pageCache.size > PAGE_CACHE) pageCache.delete(pageCache.keys().next().value!);
    }
    return page;
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

export function createSseHub(store: Store, options: SseOptions | number = {}): SseHub {
  const o = { ...SSE_DEFAULTS, ...(typeof options === 'number' ? { pollMs: options } : options) };
  const clients = new Set<{ wake(): void; close(): void }>();
  let dropped = 0;
  let unsubscribe: (() => void) | null = null;
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
  const watch = (): void => {
    unsubscribe ??= store.subscribe({ pollMs: o.pollMs }, wakeAll);
  };
  const unwatchIfIdle = (): void => {
    if (clients.size === 0 && unsubscribe) {
      unsubscribe();
      unsubscribe = null;
    }
  };

  const wholeLogPage = wholeLogPages(store, o.pageSize);
  const schedule = turns();

  return {
    get size() {
      return clients.size;
    },
    get dropped() {
      return dropped;
    },
    open(req, res, options) {
      if (clients.size >= o.maxClients) {
        sendJson(res, httpStatusOf('TOO_MANY_STREAMS'), { error: { code: 'TOO_MANY_STREAMS', message: `${o.maxClients} event streams are open, the most this server serves; retry later` } }, { 'retry-after': '5' });
        return;
      }
      const lastEventId = Number(req.headers['last-event-id']);
      const requested = options.afterSeq ?? (Number.isSafeInteger(lastEventId) && lastEventId >= 0 ? lastEventId : undefined);
      startStream(res);

      // The cursor: the last seq sent (the whole log), and for one stream also its last version read.
      let seq = requested ?? store.lastSeq();
      let version = options.stream !== undefined && requested === undefined ? store.streamVersion(options.stream) : 0;
      let busy = false;
      let queued = false;
      let waitingForDrain = false;
      let closed = false;
      let slowTimer: NodeJS.Timeout | undefined;

      const nextPage = (): Page => {
        if (options.stream === undefined) return wholeLogPage(seq);
        const events = store.read(options.stream, { from: version + 1, to: version + o.pageSize });
        if (events.length > 0) version = events[events.length - 1]!.version;
        // A stream's events up to the client's Last-Event-ID were sent before.
        const fresh = events.filter((e) => e.seq > seq);
        return { text: fresh.map(message).join(''), lastSeq: fresh.at(-1)?.seq ?? seq, count: events.length };
      };

      /** Asks for a turn (once: a client is in the queue at most once). */
      const later = (): void => {
        if (queued || closed) return;
        queued = true;
        schedule(() => {
          queued = false;
          pump();
        });
      };
      const pump = (): void => {
        if (closed || busy || waitingForDrain) return;
        busy = true;
        if (options.stream === undefined && store.readAllAsync && store.holdsAfter && !store.holdsAfter(seq)) {
          // Before what this supervisor holds (PostgreSQL pages ended actors' events out): the page is read from
          // the database. A wake meanwhile found the client busy, so one more turn follows the page.
          store.readAllAsync({ afterSeq: seq, limit: o.pageSize }).then(
            (events) => {
              busy = false;
              if (closed) return;
              deliver({ text: events.map(message).join(''), lastSeq: events.at(-1)?.seq ?? seq, count: events.length });
              // (None read: the rest up to the head was archived; the next commit wakes it.)
              if (!waitingForDrain && events.length > 0) later();
            },
            () => {
              busy = false;
              close(true);
            },
          );
          return;
        }
        try {
          deliver(nextPage());
        } catch {
          close(true); // the log closed under us (shutdown)
        } finally {
          busy = false;
        }
      };
      const deliver = (page: Page): void => {
        seq = page.lastSeq;
        if (page.text) res.write(page.text);
        if (res.writableNeedDrain) {
          // The socket holds a page it has not sent: wait for it, and drop a client that never takes it.
          waitingForDrain = true;
          slowTimer = setTimeout(() => {
            dropped += 1;
            close(true);
          }, o.slowClientMs);
          res.once('drain', () => {
            clearTimeout(slowTimer);
            waitingForDrain = false;
            later();
          });
        } else if (page.count === o.pageSize) later(); // more to catch up on: after the other clients' turns
      };

      const ping = setInterval(() => {
        if (!closed && !waitingForDrain) res.write(': ping\n\n');
      }, KEEPALIVE_MS);
      ping.unref();

      const client = { wake: later, close: () => close(false) };
      const close = (destroy: boolean): void => {
        if (closed) return;
        closed = true;
        clearInterval(ping);
        clearTimeout(slowTimer);
        clients.delete(client);
        unwatchIfIdle();
        if (destroy) res.destroy();
        else if (!res.writableEnded) res.end();
      };
      clients.add(client);
      watch();
      req.on('close', () => close(false));
      res.on('error', () => close(true));
      later();
    },
    closeAll() {
      for (const c of [...clients]) c.close();
    },
  };
}
