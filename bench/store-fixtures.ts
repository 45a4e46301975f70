// What the store benchmarks write, the same on SQLite and PostgreSQL so their figures compare: one event's data and
// time, and the replay log (10,000 instance histories of 10 events: a realistic mix of lifecycle events).
export const data = { pid: 4242, host: '127.0.0.1', port: 4100, containerId: null };
export const at = '2026-01-01T00:00:00.000Z';

/** How many instance histories the replay log holds: in a measurement, and in a smoke run (harness.ts `sizes`). */
export const REPLAY_STREAMS = { full: 10_000, smoke: 1000 };

const spec = {
  instanceId: 'x',
  appId: 'com.example.hello',
  appDir: '/a',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 5, backoffMs: 1000, maxBackoffMs: 60000, resetAfterMs: 600000 },
};

/** One instance's history in the replay log: requested, running, a crash, a restart by policy, running again. */
export const replayHistory = [
  { type: 'instance.requested', data: { spec } },
  { type: 'instance.spawned', data },
  { type: 'instance.healthy', data: { identity: 'match' } },
  { type: 'instance.running', data: {} },
  { type: 'instance.crashed', data: { reason: 'exit', exitCode: 1 } },
  { type: 'instance.restart-scheduled', data: { attempt: 1, dueAt: at } },
  { type: 'instance.restart-due', data: { attempt: 1 } },
  { type: 'instance.spawned', data },
  { type: 'instance.healthy', data: { identity: 'match' } },
  { type: 'instance.running', data: {} },
].map((e) => ({ ...e, at }));
