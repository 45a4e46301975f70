// foldLog replays the whole log in one seq-order pass (the store's lean replay read); each stream must
// end exactly where replaying that stream alone (readStream, the inspector's path) ends.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { foldLog } from '../../../src/inspect/inspection.ts';
import { toMachineEvent, type ActorKind } from '../../../src/domain/events.ts';
import { machines, replay, stateName } from '../../../src/machines/runtime.ts';
import { collect } from '../../../src/store/port.ts';
import { SqlitePortStore } from '../../../src/store/sqlite/port-adapter.ts';
import { tempDir } from '../../support/tmp.ts';

const restart = { policy: 'on-failure', maxRestarts: 1, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 };
const spec = (id: string) => ({
  instanceId: id,
  appId: 'a',
  appDir: '/a',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart,
});
const request = {
  executionId: 'exec_1',
  uri: 'at://did:plc:a/x/y',
  handler: 'h',
  input: {},
  callerDid: null,
  timeoutMs: 5000,
};

describe('foldLog', () => {
  it('ends every stream where replaying it alone ends, in order of first event, skipping streams of no known kind', async () => {
    const s = new SqlitePortStore(join(tempDir(), 'log.db'));
    let t = Date.parse('2026-01-01T00:00:00.000Z');
    const at = () => new Date((t += 1000)).toISOString();
    const add = (stream: string, type: string, data: Record<string, unknown> = {}) =>
      s.appendToStream(stream, [{ type, data, at: at() }], { expectedVersion: 'any' });
    // Interleaved histories: a crash with a restart, a second crash that gives up, an execution, a rejected event.
    await add('instance-b', 'instance.requested', { spec: spec('b') });
    await add('instance-a', 'instance.requested', { spec: spec('a') });
    await add('reconciler', 'reconciler.pass', { seen: 2 });
    await add('execution-e', 'execution.requested', { request, deadline: '2026-01-01T01:00:00.000Z' });
    for (const stream of ['instance-a', 'instance-b']) {
      await add(stream, 'instance.spawned', { pid: 7, host: '127.0.0.1', port: 4100 });
      await add(stream, 'instance.healthy', { identity: 'match' });
      await add(stream, 'instance.running');
    }
    await add('instance-a', 'instance.crashed', { reason: 'exit', exitCode: 1 });
    await add('execution-e', 'execution.resolved', { codeCid: 'c', runtimeCid: 'r' });
    await add('instance-a', 'instance.restart-scheduled', { attempt: 1, dueAt: '2026-01-01T02:00:00.000Z' });
    await add('instance-a', 'instance.restart-due', { attempt: 1 });
    await add('instance-a', 'instance.spawned', { pid: 8 });
    await add('instance-a', 'instance.healthy', { identity: 'match' });
    await add('instance-a', 'instance.running');
    await add('instance-a', 'instance.crashed', { reason: 'exit', exitCode: 2 });
    await add('instance-b', 'instance.rejected', { type: 'instance.running' });
    await add('instance-b', 'instance.stop-requested');

    const { streams, events } = await foldLog(s);
    expect([...streams.keys()]).toEqual(['instance-b', 'instance-a', 'execution-e']);
    expect(events).toBe((await collect(s.readAll())).filter((e) => e.stream !== 'reconciler').length);
    for (const [stream, f] of streams) {
      const history = await collect(s.readStream(stream));
      const alone = replay(machines[f.kind as ActorKind], history.map(toMachineEvent));
      expect([stateName(f.snapshot), f.snapshot.status, f.snapshot.context]).toEqual([
        stateName(alone),
        alone.status,
        alone.context,
      ]);
      expect([f.version, f.createdAt, f.updatedAt]).toEqual([history.length, history[0]!.at, history.at(-1)!.at]);
    }
    expect(stateName(streams.get('instance-a')!.snapshot)).toBe('crashed.down');
    expect(stateName(streams.get('instance-b')!.snapshot)).toBe('stopping');
    await s.close();
  });
});
