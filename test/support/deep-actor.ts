// A log holding app instances with long histories, written straight into SQLite as the host would write them:
// a running instance whose tools are granted and revoked over and over. With `snapshots`, a snapshot every
// SNAPSHOT_EVERY events (as the supervisor keeps them); without, none (a log whose snapshots a release made stale).
import { encodeSnapshot, SNAPSHOT_EVERY } from '../../src/inspect/snapshots.ts';
import { toMachineEvent, type NewEvent, type RecordedEvent } from '../../src/domain/events.ts';
import { initialSnapshot, machines, replay, stateName } from '../../src/machines/runtime.ts';
import { actorStatus, summarize } from '../../src/machines/summary.ts';
import { SqliteEventStore } from '../../src/store/sqlite/event-store.ts';
import type { InstanceSpec } from '../../src/machines/instance.machine.ts';

const spec = (id: string): InstanceSpec => ({
  instanceId: id,
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 10, maxBackoffMs: 20, resetAfterMs: 1000 },
});
const at = (i: number) => new Date(Date.parse('2026-01-01T00:00:00.000Z') + i * 1000).toISOString();

function event(id: string, v: number): NewEvent {
  if (v === 1) return { type: 'instance.requested', at: at(v), data: { spec: spec(id) } };
  if (v === 2)
    return {
      type: 'instance.spawned',
      at: at(v),
      data: { pid: 4242, host: '127.0.0.1', port: 4100, containerId: null },
    };
  if (v === 3) return { type: 'instance.healthy', at: at(v), data: { identity: 'match' } };
  if (v === 4) return { type: 'instance.running', at: at(v), data: {} };
  return {
    type: v % 2 ? 'instance.tool-revoked' : 'instance.tool-granted',
    at: at(v),
    data: { tool: `tool-${v % 13}` },
  };
}

/**
 * Appends `events` events of instance `id` to the log at `file`. With snapshots: appends of SNAPSHOT_EVERY, each
 * with the fold's snapshot. Without: appends of 1,000 and no fold past the first append (folding is what takes
 * the time; the projection row then holds the state after the first append, which no read here relies on).
 */
export function writeDeepActor(file: string, id: string, events: number, options: { snapshots: boolean }): void {
  const store = new SqliteEventStore(file, { synchronous: 'NORMAL', skipQuickCheck: true });
  try {
    const machine = machines.instance;
    const stream = `instance-${id}`;
    const size = options.snapshots ? SNAPSHOT_EVERY : 1000;
    let snapshot = initialSnapshot(machine);
    for (let v = 1; v <= events; v += size) {
      const batch = Array.from({ length: Math.min(size, events - v + 1) }, (_, i) => event(id, v + i));
      if (options.snapshots || v === 1)
        snapshot = replay(
          machine,
          batch.map((e) => toMachineEvent(e as Pick<RecordedEvent, 'type' | 'at' | 'data'>)),
          snapshot,
        );
      const version = v + batch.length - 1;
      const projection = {
        id,
        kind: 'instance',
        stream,
        state: stateName(snapshot),
        status: actorStatus(snapshot),
        version,
        createdAt: at(1),
        updatedAt: at(version),
        summary: summarize('instance', snapshot),
      };
      const snap =
        options.snapshots && version % SNAPSHOT_EVERY === 0
          ? { snapshot: encodeSnapshot(machine, stream, version, at(1), snapshot) }
          : {};
      store.append(stream, batch, { expectedVersion: v - 1, projection, ...snap });
    }
  } finally {
    store.close();
  }
}
