// SIGKILL a writer at random moments ≥ 50 times: after each kill the log opens, quick_check passes,
// every acknowledged append is there, and no batch is partially visible.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteEventStore } from '../../src/store/sqlite/event-store.ts';
import { tempDir } from '../support/tmp.ts';

const KILLS = 50;

function runAndKill(file: string, afterMs: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, '../fixtures/append-loop.ts'), file],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let errOut = '';
    let started = false;
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (!started) {
        started = true;
        setTimeout(() => child.kill('SIGKILL'), afterMs);
      }
    });
    child.stderr.on('data', (b: Buffer) => (errOut += b.toString()));
    child.on('exit', (_code, signal) => {
      if (signal !== 'SIGKILL') return reject(new Error(`writer exited on its own (${signal}): ${errOut}`));
      // Only complete lines are acknowledgements; a torn last line was never fully acknowledged.
      resolve(out.split('\n').slice(0, -1));
    });
  });
}

describe('event store under SIGKILL', () => {
  it(`keeps every acknowledged append and never shows a partial batch (${KILLS} kills)`, async () => {
    const file = join(tempDir(), 'crash.db');
    const acked = new Map<string, { stream: string; version: number }>();
    let totalAcked = 0;
    for (let k = 0; k < KILLS; k++) {
      const lines = await runAndKill(file, Math.floor(Math.random() * 60));
      for (const l of lines) {
        const [stream, version, batch] = l.split(' ');
        acked.set(batch!, { stream: stream!, version: Number(version) });
      }
      totalAcked += lines.length;

      const store = new SqliteEventStore(file); // runs quick_check; throws if damaged
      const events = store.readAll();
      const batches = new Map<string, { size: number; seen: number[] }>();
      for (const e of events) {
        const d = e.data as { batch: string; i: number; size: number };
        const b = batches.get(d.batch) ?? { size: d.size, seen: [] };
        b.seen.push(d.i);
        batches.set(d.batch, b);
      }
      for (const [batch, b] of batches)
        expect(b.seen, `batch ${batch} is partial`).toEqual(Array.from({ length: b.size }, (_, i) => i));
      for (const [batch, a] of acked) {
        expect(batches.has(batch), `acknowledged batch ${batch} is missing`).toBe(true);
        expect(store.streamVersion(a.stream)).toBeGreaterThanOrEqual(a.version);
      }
      for (const s of store.streams()) {
        expect(store.read(s.stream).map((e) => e.version)).toEqual(Array.from({ length: s.version }, (_, i) => i + 1));
      }
      store.close();
    }
    console.log(`[crash test] ${KILLS} SIGKILLs, ${totalAcked} acknowledged appends, all present`);
    expect(totalAcked).toBeGreaterThan(KILLS);
  }, 300_000);
});
