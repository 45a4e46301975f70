// A PostgreSQL log of many ended actors, written fast: the golden histories (test/fixtures/golden, real actor
// histories that end in a terminal state), renamed, appended in batches through PgEventStore.appendMany with the
// actors projection registered — so every actor has its terminal row, as a supervisor's appends leave it.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { actorsProjection } from '../../src/supervisor/host/actors-projection.ts';
import type { History } from '../../src/domain/history.ts';
import { readHistoryFile } from '../../src/inspect/history-file.ts';
import { splitStoreUrl } from '../../src/store/postgres/host-store.ts';
import { PgEventStore } from '../../src/store/postgres/event-store.ts';

const GOLDEN = join(import.meta.dirname, '..', 'fixtures', 'golden');

/** The golden histories (each ends in a terminal state). */
export function endedHistories(): History[] {
  return readdirSync(GOLDEN)
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .map((f) => readHistoryFile(join(GOLDEN, f)));
}

export interface EndedActor {
  id: string;
  kind: 'instance' | 'execution';
  stream: string;
  events: number;
}

/**
 * Appends `count` ended actors (golden histories round robin, ids `<prefix><n>`) to the store at `url`
 * (`?schema=` honoured), `batch` actors per appendMany. Returns what it wrote.
 */
export async function writeEndedActors(
  url: string,
  count: number,
  options: { prefix?: string; batch?: number } = {},
): Promise<EndedActor[]> {
  const histories = endedHistories();
  const split = splitStoreUrl(url);
  const store = await PgEventStore.open({
    url: split.url,
    schema: split.schema ?? 'runlog',
    projections: [actorsProjection()],
  });
  const prefix = options.prefix ?? 'ended';
  const batch = options.batch ?? 200;
  const written: EndedActor[] = [];
  try {
    for (let n = 0; n < count; n += batch) {
      const appends = [];
      for (let k = n; k < Math.min(count, n + batch); k++) {
        const h = histories[k % histories.length]!;
        const id = `${prefix}${String(k).padStart(6, '0')}`;
        const stream = `${h.header.kind}-${id}`;
        const events = h.events.map((e) => ({
          type: e.type,
          at: e.at,
          data: JSON.parse(JSON.stringify(e.data).replaceAll(h.header.id, id)) as Record<string, unknown>,
          meta: e.meta,
        }));
        appends.push({ stream, events, expectedVersion: 'no-stream' as const });
        written.push({ id, kind: h.header.kind, stream, events: events.length });
      }
      const outcomes = await store.appendMany(appends);
      const failed = outcomes.find((o) => !o.ok);
      if (failed && !failed.ok) throw failed.error;
    }
  } finally {
    await store.close();
  }
  return written;
}
