// store.fold (issue 15): events folded per second from the log through the port (foldLog: paged read, parse, upcast,
// transition) against
// the machine's own bare `transition` rate over the same events already in memory, measured in the same run.
// The ratio says how much of the fold's time is the store's (target ≥ 0.6).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { foldLog } from '../src/inspect/inspection.ts';
import { toMachineEvent } from '../src/domain/events.ts';
import { foldEvent, machines } from '../src/machines/runtime.ts';
import { collect } from '../src/store/port.ts';
import { SqlitePortStore } from '../src/store/sqlite/port-adapter.ts';
import { median, nowMs, sideBySide, sizes, type Bench } from './harness.ts';
import { REPLAY_STREAMS, replayHistory } from './store-fixtures.ts';

export const foldBenches: Bench[] = [
  {
    name: 'store.fold',
    async run(opts) {
      const { rounds, log } = opts;
      const STREAMS = sizes(opts, REPLAY_STREAMS);
      const dir = mkdtempSync(join(tmpdir(), 'runlog-bench-fold-'));
      const store = new SqlitePortStore(join(dir, 'log.db'), { synchronous: 'NORMAL' });
      const history = replayHistory; // the store benches' instance history (store-fixtures.ts)
      for (let s = 0; s < STREAMS; s += 500) {
        await store.appendMany(
          Array.from({ length: Math.min(500, STREAMS - s) }, (_, k) => ({
            stream: `instance-${s + k}`,
            events: history,
            expectedVersion: 'no-stream' as const,
          })),
        );
      }
      // The same events in memory, in seq order, as machine events: the bare machine's input.
      const inMemory = (await collect(store.readAll())).map((e) => ({ stream: e.stream, event: toMachineEvent(e) }));
      log(`store.fold: ${inMemory.length} events in ${STREAMS} streams`);
      const machine = machines.instance;
      const ours: number[] = [];
      const bare: number[] = [];
      try {
        for (let r = 0; r < rounds; r++) {
          let t0 = nowMs();
          const { events } = await foldLog(store);
          ours.push((events / (nowMs() - t0)) * 1000);
          t0 = nowMs();
          const snapshots = new Map<string, ReturnType<typeof foldEvent>>();
          for (const { stream, event } of inMemory)
            snapshots.set(stream, foldEvent(machine, snapshots.get(stream), event));
          bare.push((inMemory.length / (nowMs() - t0)) * 1000);
          if (snapshots.size !== STREAMS) throw new Error(`bare fold: ${snapshots.size} streams`);
        }
      } finally {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      }
      const v = median(ours);
      const b = median(bare);
      return sideBySide('store.fold', 'events/s', v, b, { target: 'ratio ≥ 0.6' });
    },
  },
];
