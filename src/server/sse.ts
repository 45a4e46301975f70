// Server-sent events of new log entries, tailed with the store's `subscribe` (which also sees commits
// made by other processes). Each message: `id: <seq>`, `event: event`, `data: <RecordedEvent JSON>`.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RecordedEvent } from '../domain/events.ts';
import type { EventStore } from '../store/event-store.ts';
import { SECURITY_HEADERS } from './http.ts';

export const KEEPALIVE_MS = 15_000;

export interface SseHub {
  open(req: IncomingMessage, res: ServerResponse, options: { afterSeq?: number; stream?: string }): void;
  /** Ends every open stream (server shutdown). */
  closeAll(): void;
  readonly size: number;
}

export function createSseHub(store: EventStore, pollMs = 200): SseHub {
  const open = new Set<() => void>();
  return {
    get size() {
      return open.size;
    },
    open(req, res, options) {
      const lastEventId = Number(req.headers['last-event-id']);
      const afterSeq = options.afterSeq ?? (Number.isSafeInteger(lastEventId) && lastEventId >= 0 ? lastEventId : undefined);
      res.writeHead(200, {
        ...SECURITY_HEADERS,
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      res.write('retry: 2000\n: runlog event stream\n\n');
      const send = (e: RecordedEvent): void => {
        if (res.writableEnded || res.destroyed) return;
        res.write(`id: ${e.seq}\nevent: event\ndata: ${JSON.stringify(e)}\n\n`);
      };
      const off = store.subscribe({ ...(afterSeq !== undefined ? { afterSeq } : {}), ...(options.stream ? { stream: options.stream } : {}), pollMs }, send);
      const ping = setInterval(() => {
        if (!res.writableEnded) res.write(': ping\n\n');
      }, KEEPALIVE_MS);
      ping.unref();
      let closed = false;
      const close = (): void => {
        if (closed) return;
        closed = true;
        off();
        clearInterval(ping);
        open.delete(close);
        if (!res.writableEnded) res.end();
      };
      open.add(close);
      req.on('close', close);
      res.on('error', close);
    },
    closeAll() {
      for (const close of [...open]) close();
    },
  };
}
