// Logs for the retention tests: real actor histories (the golden logs, renamed and moved in time) written through
// the real host and store, so projections, snapshots and the chain are what a supervisor writes.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createRunlog } from '../../src/supervisor/runlog.ts';
import type { History } from '../../src/domain/history.ts';
import { readHistoryFile } from '../../src/inspect/history-file.ts';
import { runlogInternals } from '../../src/supervisor/runlog-internals.ts';

const GOLDEN = join(import.meta.dirname, '..', 'fixtures', 'golden');
export const goldenHistories: History[] = readdirSync(GOLDEN)
  .filter((f) => f.endsWith('.jsonl'))
  .sort()
  .map((f) => readHistoryFile(join(GOLDEN, f)));

export interface BuiltActor {
  id: string;
  kind: 'instance' | 'execution';
  /** When its last event happened. */
  endedAt: string;
  live: boolean;
}

/**
 * Writes `ended` actors that reached a terminal state (each a golden history, round robin), one every minute from
 * `start`, interleaved with `live` instances that never end (the first two events of a golden instance history,
 * spawned in between, so live and ended events alternate in the log). `store`: a postgres:// URL (default: the
 * SQLite log under `home`).
 */
export async function writeRetentionLog(
  home: string,
  options: { ended: number; live: number; start: string; store?: string },
): Promise<BuiltActor[]> {
  const rl = await createRunlog({
    home,
    supervise: false,
    readOnly: false,
    ...(options.store ? { store: options.store } : {}),
  });
  const built: BuiltActor[] = [];
  let t = Date.parse(options.start);
  const liveHistory = goldenHistories.find((h) => h.header.kind === 'instance')!;
  const liveEvery = options.live > 0 ? Math.max(1, Math.floor(options.ended / options.live)) : Infinity;
  let lives = 0;
  const write = async (h: History, id: string, events: History['events']): Promise<string> => {
    let at = '';
    for (const [i, e] of events.entries()) {
      at = new Date((t += 1000)).toISOString();
      const data = JSON.parse(JSON.stringify(e.data).replaceAll(h.header.id, id)) as Record<string, unknown>;
      const event = { type: e.type, at, data, meta: e.meta } as never;
      if (i === 0) await runlogInternals(rl).host.create(h.header.kind, id, event);
      else await rl.send(h.header.kind, id, event);
    }
    return at;
  };
  for (let n = 0; n < options.ended; n++) {
    const h = goldenHistories[n % goldenHistories.length]!;
    const id = `${h.header.kind === 'instance' ? 'inst' : 'exec'}_r${String(n).padStart(5, '0')}`;
    // Half of each ended history, then a live actor's start, then the rest: the log interleaves them.
    const half = Math.ceil(h.events.length / 2);
    await write(h, id, h.events.slice(0, half));
    if (n % liveEvery === 0 && lives < options.live) {
      const liveId = `inst_live${String(lives++).padStart(4, '0')}`;
      const at = await write(liveHistory, liveId, liveHistory.events.slice(0, 2));
      built.push({ id: liveId, kind: 'instance', endedAt: at, live: true });
    }
    // The rest of the history with the same id (write() creates only at its first event).
    let at = '';
    for (const e of h.events.slice(half)) {
      at = new Date((t += 1000)).toISOString();
      const data = JSON.parse(JSON.stringify(e.data).replaceAll(h.header.id, id)) as Record<string, unknown>;
      await rl.send(h.header.kind, id, { type: e.type, at, data, meta: e.meta } as never);
    }
    built.push({ id, kind: h.header.kind, endedAt: at, live: false });
    t += 60_000;
  }
  await rl.close();
  return built;
}
