// The `actors` projection registered with the event-store port: rows folded by the store inside the append
// transaction match a full replay of each stream, whichever handle appended, and a rebuild gives the same rows.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { actorsProjection, getActorRow, listActorRows } from '../../../src/supervisor/host/actors-projection.ts';
import { toMachineEvent, type NewEvent } from '../../../src/domain/events.ts';
import { machines, replay, stateName } from '../../../src/machines/runtime.ts';
import { actorStatus, summarize } from '../../../src/machines/summary.ts';
import { MemoryEventStore } from '../../../src/store/memory/event-store.ts';
import type { EventStorePort } from '../../../src/store/port.ts';
import { SqlitePortStore } from '../../../src/store/sqlite/port-adapter.ts';
import { tempDir } from '../../support/tmp.ts';

const at = (n: number) => `2026-12-01T00:00:${String(n).padStart(2, '0')}.000Z`;
const spec = {
  instanceId: 'a1',
  appId: 'com.example.hello',
  appDir: '/a',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 5, backoffMs: 1000, maxBackoffMs: 60000, resetAfterMs: 600000 },
};
const spawned = { pid: 4242, host: '127.0.0.1', port: 4100, containerId: null };
const history: NewEvent[] = [
  { type: 'instance.requested', data: { spec } },
  { type: 'instance.spawned', data: spawned },
  { type: 'instance.healthy', data: { identity: 'match' } },
  { type: 'instance.running', data: {} },
  { type: 'instance.crashed', data: { reason: 'exit', exitCode: 1 } },
  { type: 'instance.restart-scheduled', data: { attempt: 1, dueAt: at(30) } },
  { type: 'instance.restart-due', data: { attempt: 1 } },
  { type: 'instance.spawned', data: { ...spawned, pid: 4343 } },
].map((e, i) => ({ ...e, at: at(i) }));

/** The row a full replay of the stream gives (what `runlog rebuild` computes today). */
async function replayedRow(store: EventStorePort, stream: string) {
  const events = [];
  for await (const e of store.readStream(stream)) events.push(e);
  const snap = replay(machines.instance, events.map(toMachineEvent));
  return {
    state: stateName(snap),
    status: actorStatus(snap),
    version: events.length,
    createdAt: events[0]!.at,
    updatedAt: events.at(-1)!.at,
    summary: summarize('instance', snap),
  };
}

describe('actors projection on the port', () => {
  it('rows match a full replay after every append, and a rebuild gives the same rows (memory store)', async () => {
    const store = new MemoryEventStore({ projections: [actorsProjection()] });
    for (let i = 0; i < history.length; i++) {
      await store.appendToStream('instance-a1', [history[i]!], { expectedVersion: i });
      expect(await getActorRow(store, 'a1')).toMatchObject({
        id: 'a1',
        kind: 'instance',
        stream: 'instance-a1',
        ...(await replayedRow(store, 'instance-a1')),
      });
    }
    await store.appendToStream('instance-a2', history.slice(0, 4), { expectedVersion: 'no-stream' });
    await store.appendToStream('not-an-actor', [{ type: 'x', data: {} }], { expectedVersion: 'any' });
    const rows = await listActorRows(store, { all: true });
    expect(rows.map((r) => [r.id, r.state, r.version])).toEqual([
      ['a1', (await replayedRow(store, 'instance-a1')).state, 8],
      ['a2', 'running', 4],
    ]);
    expect(await store.rebuildProjection('actors')).toEqual({ documents: 2, events: 13 });
    expect(await listActorRows(store, { all: true })).toEqual(rows);
    await store.close();
  });

  it('two handles on one SQLite file appending in turn (no shared memo) still fold exactly', async () => {
    const file = join(tempDir(), 'log.db');
    const refuse = {
      name: 'refuse',
      evolve: (_d: unknown, e: { data: Record<string, unknown> }) => {
        if (e.data.refuse) throw new Error('refused');
        return null;
      },
    };
    const a = new SqlitePortStore(file, { projections: [actorsProjection(), refuse] });
    const b = new SqlitePortStore(file, { projections: [actorsProjection()] });
    try {
      for (let i = 0; i < history.length; i++)
        await (i % 2 ? b : a).appendToStream('instance-a1', [history[i]!], { expectedVersion: i });
      const want = await replayedRow(a, 'instance-a1');
      expect(await getActorRow(a, 'a1')).toMatchObject(want);
      expect(await getActorRow(b, 'a1')).toMatchObject(want);
      // An append that rolls back (another projection refuses it) leaves the document, and the memo of the handle
      // that folded it, where they were: the next append folds onto the committed state, not the rolled-back one.
      await expect(
        a.appendToStream(
          'instance-a1',
          [{ type: 'instance.healthy', data: { identity: 'match', refuse: true }, at: at(40) }],
          { expectedVersion: 8 },
        ),
      ).rejects.toMatchObject({ code: 'STORE_PROJECTION' });
      expect(await getActorRow(b, 'a1')).toMatchObject(want);
      await a.appendToStream(
        'instance-a1',
        [{ type: 'instance.crashed', data: { reason: 'exit', exitCode: 2 }, at: at(41) }],
        { expectedVersion: 8 },
      );
      const after = await replayedRow(a, 'instance-a1');
      expect(after.state).not.toBe(want.state);
      expect(await getActorRow(b, 'a1')).toMatchObject(after);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
