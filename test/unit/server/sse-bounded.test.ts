// The supervisor's event stream under load: many clients catching up from afterSeq=0 on a large log. Each
// client is fed a page at a time and only as fast as it reads, so memory stays bounded; the number of streams
// is capped (503 past it); clients that stop reading are dropped; the server keeps answering throughout.
import { request, type IncomingMessage } from 'node:http';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Runlog } from '../../../src/supervisor/runlog.ts';
import { startServer, type RunningServer } from '../../../src/server/http-server.ts';
import type { StreamAppend } from '../../../src/store/port.ts';
import { seededRunlog } from '../../support/browser.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const TOKEN = 'cd'.repeat(32);
const BULK = 20_000;

describe('SSE catch-up from afterSeq=0', () => {
  let rl: Runlog;
  let server: RunningServer;
  let lastSeq: number;
  beforeAll(async () => {
    ({ rl } = await seededRunlog(tempDir()));
    // A log of some 20,000 events of ~300 bytes: unbounded buffering would hold ~6 MB per client.
    const pad = 'x'.repeat(200);
    const requests: StreamAppend[] = [];
    for (let s = 0; s < BULK / 100; s++) {
      requests.push({
        stream: `instance-bulk_${s}`,
        events: Array.from({ length: 100 }, (_, v) => ({ type: 'instance.spawned', data: { pid: v, pad } })),
        expectedVersion: 'no-stream',
      });
    }
    await runlogInternals(rl).store.appendMany(requests);
    lastSeq = await runlogInternals(rl).store.lastSeq();
    server = await startServer({
      runlog: rl,
      host: '127.0.0.1',
      port: 0,
      token: TOKEN,
      sse: { maxClients: 64, slowClientMs: 600_000, pageSize: 200 },
    });
  });
  afterAll(async () => {
    await server?.close();
    await rl?.close();
  });

  const headers = { authorization: `Bearer ${TOKEN}` };

  it('a client that reads gets every event once, in order', async () => {
    const ctrl = new AbortController();
    const res = await fetch(new URL('/api/events/stream?afterSeq=0', server.url), { headers, signal: ctrl.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    const ids: number[] = [];
    while (ids.at(-1) !== lastSeq) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`stream ended at ${ids.at(-1)}`);
      buf += decoder.decode(value, { stream: true });
      const parts = buf.split('\n\n');
      buf = parts.pop()!;
      for (const p of parts) {
        const m = /^id: (\d+)$/m.exec(p);
        if (m) ids.push(Number(m[1]));
      }
    }
    ctrl.abort();
    expect(ids).toEqual(Array.from({ length: lastSeq }, (_, i) => i + 1));
  });

  /** Opens `n` event streams from afterSeq=0 whose clients never read. */
  async function stalled(url: string, n: number): Promise<{ statuses: number[]; open: IncomingMessage[] }> {
    const open: IncomingMessage[] = [];
    const statuses = await Promise.all(
      Array.from(
        { length: n },
        () =>
          new Promise<number>((resolve, reject) => {
            const req = request(new URL('/api/events/stream?afterSeq=0', url), { headers }, (res) => {
              if (res.statusCode === 200) {
                res.pause(); // never reads: the server's socket fills up
                open.push(res);
              } else res.resume();
              resolve(res.statusCode ?? 0);
            });
            req.on('error', reject);
            req.end();
          }),
      ),
    );
    return { statuses, open };
  }

  it(
    '100 clients that do not read: 64 served, the rest refused with 503; memory stays bounded; the server answers',
    { timeout: 180_000 },
    async () => {
      v8.setFlagsFromString('--expose-gc');
      const gc = runInNewContext('gc') as () => void;
      gc();
      const heapBefore = process.memoryUsage().heapUsed;
      const { statuses, open } = await stalled(server.url, 100);
      expect(statuses.filter((s) => s === 200)).toHaveLength(64);
      expect(statuses.filter((s) => s === 503)).toHaveLength(36);
      const health = await fetch(new URL('/api/health', server.url), { headers });
      expect(health.status).toBe(200);
      // Every stalled client holds about a page in the server, not the log (unbounded: 64 × 6 MB of strings).
      await new Promise((r) => setTimeout(r, 1000));
      gc();
      const grown = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
      expect(grown).toBeLessThan(48);
      for (const res of open) res.destroy();
    },
  );

  it('a client that stays backed up is dropped, and frees its slot', { timeout: 120_000 }, async () => {
    const quick = await startServer({
      runlog: rl,
      host: '127.0.0.1',
      port: 0,
      token: TOKEN,
      sse: { maxClients: 4, slowClientMs: 500, pageSize: 200 },
    });
    try {
      const { statuses, open } = await stalled(quick.url, 4);
      expect(statuses).toEqual([200, 200, 200, 200]);
      // Backed up for longer than slowClientMs: the server ends the stream (a client resumes with Last-Event-ID).
      await new Promise((r) => setTimeout(r, 3000));
      await Promise.all(
        open.map(
          (res) =>
            new Promise<void>((resolve) => {
              res.on('close', () => resolve());
              res.on('error', () => resolve());
              res.resume();
            }),
        ),
      );
      const again = await fetch(new URL('/api/events/stream', quick.url), { headers });
      expect(again.status).toBe(200);
      await again.body?.cancel();
    } finally {
      await quick.close();
    }
  });
});
