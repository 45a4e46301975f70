// Writes the golden logs under test/fixtures/golden/ (issue 15): histories written by this release, which every
// later release must fold to the same states (test/unit/machines/golden-logs.test.ts, the check Temporal's replayer makes
// of workflow code). Run it once per release that changes what is recorded, NEVER to make a failing golden test
// pass: a golden log that no longer folds to its expected states is an old history the change would break.
//
//   npx tsx scripts/write-golden-logs.ts [--out test/fixtures/golden] [--tag <release>]
//
// The events go through the actor host and the real machines into a real SQLite log, with the payloads the
// supervisor's effects and reconciler dispatch (supervisor/instances/instances.ts, executions.ts, reconciler.ts); the effects
// themselves do not run (no sandbox is started). Each history is written in `runlog export`'s format, with what
// this release folds it to in expected.json: the state after every version, and the final state and context.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createRunlog } from '../src/supervisor/runlog.ts';
import { HISTORY_FORMAT } from '../src/domain/history.ts';
import { collect } from '../src/store/port.ts';
import { parseHistory } from '../src/inspect/history-file.ts';
import { replayHistory } from '../src/cli/replay-stepper.ts';
import type { ActorKind, KindNewEvent, NewEvent } from '../src/domain/events.ts';
import { runlogInternals } from '../src/supervisor/runlog-internals.ts';

const { values } = parseArgs({
  options: { out: { type: 'string', default: 'test/fixtures/golden' }, tag: { type: 'string' } },
});
const out = values.out!;
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
const release = values.tag ?? pkg.version;

let clock = Date.parse('2026-12-01T09:00:00.000Z');
const at = (ms = 1000) => new Date((clock += ms)).toISOString();
const spec = (
  id: string,
  restart = { policy: 'on-failure', maxRestarts: 3, backoffMs: 1000, maxBackoffMs: 60_000, resetAfterMs: 600_000 },
) => ({
  instanceId: id,
  appId: 'com.example.hello',
  appDir: '/var/lib/runlog/workspace/com.example.hello',
  sandbox: 'container',
  runtime: 'node',
  tools: ['git'],
  lifecycleBasePath: '/_runlog',
  restart,
});
const request = (id: string) => ({
  executionId: id,
  uri: 'at://did:plc:golden/dev.mainasara.at-run.beta.v2.code/3l2golden',
  handler: 'greet',
  input: { name: 'Ada' },
  callerDid: 'did:plc:caller',
  timeoutMs: 30_000,
});
const resolved = {
  codeCid: 'bafkreigoldencode',
  runtimeCid: 'bafkreigoldenruntime',
  runtime: 'node',
  image: 'localhost:5000/runlog-node@sha256:' + 'a'.repeat(64),
  entrypoint: 'index.js',
};
const materialized = {
  runtimeVolume: 'runlog-rt-golden',
  runtimeDigest: 'sha256:' + 'b'.repeat(64),
  codeVolume: 'runlog-code-golden',
};
const stepEvent = (name: string) => ({ type: 'execution.step', data: { name, detail: { ms: 12 } } });

const histories: { name: string; kind: ActorKind; id: string; events: NewEvent[] }[] = [
  {
    name: 'instance-crashed-restarted',
    kind: 'instance',
    id: 'inst_golden_crash',
    events: [
      { type: 'instance.requested', data: { spec: spec('inst_golden_crash') } },
      { type: 'instance.spawned', data: { pid: null, containerId: 'c0ffee01', host: '127.0.0.1', port: 41001 } },
      { type: 'instance.healthy', data: { identity: 'match' } },
      { type: 'instance.running', data: {} },
      {
        type: 'instance.crashed',
        data: { reason: 'exit', exitCode: 137, signal: null, message: 'exited unexpectedly (code 137, signal null)' },
      },
      { type: 'instance.restart-scheduled', data: { dueAt: '2026-12-01T09:00:07.000Z' } },
      { type: 'instance.restart-due', data: {} },
      { type: 'instance.spawned', data: { pid: null, containerId: 'c0ffee02', host: '127.0.0.1', port: 41002 } },
      { type: 'instance.healthy', data: { identity: 'match', warning: 'slow health check (2100 ms)' } },
      { type: 'instance.running', data: {} },
      // The supervisor was SIGKILLed and restarted: the reconciler finds the container still running.
      {
        type: 'instance.adopted',
        data: {
          containerId: 'c0ffee02',
          host: '127.0.0.1',
          port: 41002,
          pid: null,
          startedAt: '2026-12-01T09:00:08.000Z',
          evidence: { container: 'running' },
        },
      },
      { type: 'instance.stop-requested', data: { graceMs: 5000 } },
      { type: 'instance.exited', data: { exitCode: 0, signal: null } },
    ],
  },
  {
    name: 'instance-adopted',
    kind: 'instance',
    id: 'inst_golden_adopt',
    events: [
      {
        type: 'instance.discovered',
        data: {
          containerId: 'c0ffee03',
          host: '127.0.0.1',
          port: 41003,
          pid: null,
          startedAt: '2026-12-01T08:00:00.000Z',
          spec: spec('inst_golden_adopt'),
          evidence: { labels: { 'runlog.stream': 'instance-inst_golden_adopt' } },
        },
      },
      { type: 'instance.kill-requested', data: {} },
      { type: 'instance.exited', data: { exitCode: null, signal: 'SIGKILL' } },
    ],
  },
  {
    name: 'execution-succeeded',
    kind: 'execution',
    id: 'exec_golden_ok',
    events: [
      {
        type: 'execution.requested',
        data: { request: request('exec_golden_ok'), deadline: '2026-12-01T09:12:30.000Z' },
      },
      stepEvent('resolve'),
      { type: 'execution.resolved', data: resolved },
      stepEvent('materialize'),
      { type: 'execution.materialized', data: materialized },
      { type: 'execution.started', data: { containerId: 'e0e0e001' } },
      {
        type: 'execution.succeeded',
        data: { exitCode: 0, stderrTail: '', output: { greeting: 'hello, Ada' }, outputHash: 'c'.repeat(64) },
      },
    ],
  },
  ...(['resolution', 'validation', 'materialization', 'runtime', 'timeout', 'cancelled', 'lost'] as const).map(
    (reason) => {
      const id = `exec_golden_${reason}`;
      const upTo = reason === 'resolution' || reason === 'validation' ? 1 : reason === 'materialization' ? 2 : 3;
      const events: NewEvent[] = [
        { type: 'execution.requested', data: { request: request(id), deadline: '2026-12-01T09:12:30.000Z' } },
      ];
      if (upTo >= 2) events.push({ type: 'execution.resolved', data: resolved });
      if (upTo >= 3)
        events.push(
          { type: 'execution.materialized', data: materialized },
          { type: 'execution.started', data: { containerId: `e0e0${reason}` } },
        );
      if (reason === 'cancelled') events.push({ type: 'execution.cancel-requested', data: {} });
      events.push({
        type: 'execution.failed',
        data: {
          reason,
          code: `GOLDEN_${reason.toUpperCase()}`,
          message: `failed: ${reason}`,
          stderrTail: reason === 'runtime' ? 'Error: boom\n' : null,
        },
      });
      return { name: `execution-failed-${reason}`, kind: 'execution' as const, id, events };
    },
  ),
  {
    name: 'execution-adopted',
    kind: 'execution',
    id: 'exec_golden_adopted',
    events: [
      {
        type: 'execution.requested',
        data: { request: request('exec_golden_adopted'), deadline: '2026-12-01T09:12:30.000Z' },
      },
      { type: 'execution.resolved', data: resolved },
      { type: 'execution.materialized', data: materialized },
      { type: 'execution.started', data: { containerId: 'e0e0ad01' } },
      { type: 'execution.adopted', data: { containerId: 'e0e0ad01', evidence: { container: 'running' } } },
      {
        type: 'execution.succeeded',
        data: { exitCode: 0, stderrTail: '', output: { greeting: 'hello again' }, outputHash: 'd'.repeat(64) },
      },
    ],
  },
];

const home = mkdtempSync(join(tmpdir(), 'runlog-golden-'));
try {
  const rl = await createRunlog({ home, supervise: false, readOnly: false, now: () => at() });
  mkdirSync(out, { recursive: true });
  const expected: Record<string, unknown> = {};
  for (const h of histories) {
    const [first, ...rest] = h.events;
    // why: the histories are plain data, written as the release that made them wrote them; the golden test, which
    // replays them through today's machines, is what checks them against the vocabulary.
    await runlogInternals(rl).host.create(h.kind, h.id, { ...first!, at: at() } as KindNewEvent<ActorKind>);
    for (const e of rest) await rl.send(h.kind, h.id, { ...e, at: at() } as KindNewEvent<ActorKind>);
    const stream = `${h.kind}-${h.id}`;
    const events = await collect(runlogInternals(rl).store.readStream(stream));
    const lines = [
      JSON.stringify({
        runlog: 'history',
        format: HISTORY_FORMAT,
        kind: h.kind,
        id: h.id,
        stream,
        version: events.length,
        exportedAt: at(0),
        release,
      }),
      ...events.map((e) => JSON.stringify(e)),
    ];
    const text = `${lines.join('\n')}\n`;
    writeFileSync(join(out, `${h.name}.jsonl`), text);
    const view = replayHistory(parseHistory(text, h.name));
    expected[h.name] = {
      release,
      states: view.steps.map((s) => `${s.to}${s.accepted ? '' : ' (rejected)'}`),
      state: view.state,
      context: view.context,
    };
    console.log(`${h.name}: ${events.length} events, ends ${view.state}`);
  }
  writeFileSync(join(out, 'expected.json'), `${JSON.stringify(expected, null, 2)}\n`);
  await rl.close();
} finally {
  rmSync(home, { recursive: true, force: true });
}
