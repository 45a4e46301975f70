// The snapshot property (issue 15): for every actor of a log and every version k of it, restoring the snapshot of
// the fold up to k and folding the events after k gives exactly the full fold. Used over generated logs (the unit
// tier), the chaos and recovery logs and the golden logs.
import { expect } from 'vitest';
import { encodeSnapshot, decodeSnapshot, snapshotProblem, snapshotState } from '../../src/inspect/snapshots.ts';
import { toMachineEvent, type ActorKind } from '../../src/domain/events.ts';
import { machines, replay, restoreSnapshot } from '../../src/machines/runtime.ts';
import { collect, type EventStorePort } from '../../src/store/port.ts';

/**
 * Checks every actor stream of the log at up to `cuts` versions each; returns how many cuts were checked. When the
 * log keeps snapshots, the ones the supervisor actually stored (the newest, and the older ones `replay --to` reads)
 * are checked the same way: restored, plus the events after them, they give the full fold.
 */
export async function expectSnapshotPlusTailEqualsFold(
  store: Pick<EventStorePort, 'listStreams' | 'readStream' | 'snapshotAtOrBefore'>,
  cuts = 40,
): Promise<number> {
  let checked = 0;
  for (const { stream, kind } of await store.listStreams()) {
    const machine = machines[kind as ActorKind];
    if (!machine) continue;
    const events = (await collect(store.readStream(stream))).map(toMachineEvent);
    const full = snapshotState(machine, replay(machine, events));
    const stored = [
      await store.snapshotAtOrBefore(stream),
      ...(await Promise.all(
        Array.from({ length: 4 }, (_, i) =>
          store.snapshotAtOrBefore(stream, Math.floor((events.length * (i + 1)) / 5)),
        ),
      )),
    ];
    for (const record of stored) {
      if (!record) continue;
      // Its bytes must match its checksum. Its fingerprint may differ from this process's for the same source: a
      // supervisor run under tsx (the chaos and recovery children) prints a function's source differently from
      // vitest's transform, and the product then ignores the snapshot (only start-up speed changes). What is
      // checked here is its content, which must hold whoever wrote it.
      expect(
        snapshotProblem(machine, record)?.code,
        `${stream}: its stored snapshot at v${record.version} matches its checksum`,
      ).not.toBe('SNAPSHOT_CHECKSUM');
      const restored = restoreSnapshot(machine, JSON.parse(record.state));
      expect(
        snapshotState(machine, replay(machine, events.slice(record.version), restored)),
        `${stream}: stored snapshot at v${record.version} + tail = full fold`,
      ).toBe(full);
      checked += 1;
    }
    const step = Math.max(1, Math.floor(events.length / cuts));
    for (let k = 1; k <= events.length; k += step) {
      const record = encodeSnapshot(
        machine,
        stream,
        k,
        '1970-01-01T00:00:00.000Z',
        replay(machine, events.slice(0, k)),
      );
      const restored = decodeSnapshot(machine, JSON.parse(JSON.stringify(record)));
      expect(restored, `${stream}: the snapshot at v${k} decodes`).not.toBeNull();
      expect(
        snapshotState(machine, replay(machine, events.slice(k), restored!)),
        `${stream}: snapshot at v${k} + tail = full fold`,
      ).toBe(full);
      checked += 1;
    }
  }
  return checked;
}
