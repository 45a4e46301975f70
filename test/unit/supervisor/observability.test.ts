// Metrics, traces, logs and the supervisor's heartbeat, on a real SQLite log driven by fake effects (no Docker,
// no PDS). Traces go to the OpenTelemetry SDK's in-memory exporter, registered only for this runlog.
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { BoundedLabel, pdsEndpoint } from '../../../src/supervisor/observability/metrics.ts';
import { createLogger, formatLine, logActors, parseLogLevel } from '../../../src/cli/logger.ts';
import { main } from '../../../src/cli/main.ts';
import type { Io } from '../../../src/cli/output.ts';
import { UsageError } from '../../../src/domain/errors.ts';
import { supervision } from '../../../src/domain/supervision.ts';
import type { KindNewEvent } from '../../../src/domain/events.ts';
import { startServer } from '../../../src/server/http-server.ts';
import { parseListen } from '../../../src/server/listen.ts';
import { startMetricsServer } from '../../../src/server/metrics-server.ts';
import { fakeEffects, instanceSpec } from '../../support/browser.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const open: Runlog[] = [];
afterEach(async () => {
  for (const rl of open.splice(0)) await rl.close();
});

async function supervisor(extra: Parameters<typeof createRunlog>[0] = {}): Promise<Runlog> {
  const rl = await createRunlog({
    home: tempDir(),
    effects: fakeEffects(),
    reconcile: false,
    watchApps: false,
    engineWatch: false,
    log: () => undefined,
    ...extra,
  });
  open.push(rl);
  return rl;
}

const requested = (executionId: string, uri: string): KindNewEvent<'execution'> => ({
  type: 'execution.requested',
  data: {
    request: { executionId, uri, handler: 'add', input: {}, callerDid: null, timeoutMs: 30_000 },
    deadline: new Date(Date.now() + 30_000).toISOString(),
  },
});

/** The value of one series in Prometheus' text format (labels given in the order prom-client prints them). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('supervision (heartbeat → supervised or last known state)', () => {
  const hb = {
    node: 'n1',
    pid: 42,
    startedAt: '2026-12-01T10:00:00.000Z',
    beatAt: '2026-12-01T10:00:10.000Z',
    intervalMs: 5000,
    stoppedAt: null,
  };

  it('is supervised until three intervals pass without a heartbeat, then unsupervised since the last one', () => {
    expect(supervision(hb, '2026-12-01T10:00:25.000Z')).toEqual({
      supervised: true,
      heartbeatAt: hb.beatAt,
      since: null,
      node: 'n1',
      pid: 42,
    });
    expect(supervision(hb, '2026-12-01T10:00:25.001Z')).toMatchObject({ supervised: false, since: hb.beatAt });
  });

  it('a clean stop is unsupervised at once, since the stop; no heartbeat at all is unsupervised since never', () => {
    expect(supervision({ ...hb, stoppedAt: '2026-12-01T10:00:11.000Z' }, '2026-12-01T10:00:11.500Z')).toMatchObject({
      supervised: false,
      since: '2026-12-01T10:00:11.000Z',
    });
    expect(supervision(null, '2026-12-01T10:00:00.000Z')).toEqual({
      supervised: false,
      heartbeatAt: null,
      since: null,
      node: null,
      pid: null,
    });
  });

  it(
    'a supervising runlog records its heartbeat in the log; ps (another opening) says supervised, ' +
      'then last known after close',
    async () => {
      const home = tempDir();
      const rl = await createRunlog({
        home,
        effects: fakeEffects(),
        reconcile: false,
        watchApps: false,
        engineWatch: false,
        log: () => undefined,
        heartbeatMs: 60_000,
      });
      await runlogInternals(rl).host.create('instance', 'inst_web', {
        type: 'instance.requested',
        data: { spec: instanceSpec() },
      });
      await rl.idle();
      const ps = async () => {
        const out: string[] = [];
        const err: string[] = [];
        const io = (json: boolean): Io => ({ out: (t) => out.push(t), err: (t) => err.push(t), json });
        expect(await main(['ps', '--home', home, '--json'], io)).toBe(0);
        const table: string[] = [];
        expect(
          await main(['ps', '--home', home], (json) => ({ out: (t) => table.push(t), err: (t) => err.push(t), json })),
        ).toBe(0);
        return {
          rows: JSON.parse(out.join('\n')) as Record<string, unknown>[],
          table: table.join('\n'),
          err: err.join('\n'),
        };
      };
      const live = await ps();
      expect(live.rows[0]).toMatchObject({ id: 'inst_web', state: 'running', supervised: true });
      expect(typeof live.rows[0]!.heartbeatAt).toBe('string');
      expect(live.table).not.toContain('last known');
      await rl.close();
      const after = await ps();
      expect(after.rows[0]).toMatchObject({ id: 'inst_web', state: 'running', supervised: false });
      expect(after.table).toMatch(/inst_web\s+instance\s+running \(last known\)/);
      expect(after.err).toMatch(/not supervised since \S+ \(last heartbeat from \S+ pid \d+\)/);
      const insp: string[] = [];
      expect(
        await main(['inspect', 'inst_web', '--home', home], (json) => ({
          out: (t) => insp.push(t),
          err: () => undefined,
          json,
        })),
      ).toBe(0);
      expect(insp.join('\n')).toMatch(
        /state: {3}running \(active\) — last known state[\s\S]*supervised: no since \S+Z/,
      );
      // A clean close leaves the stop mark in the database file itself (the WAL was checkpointed and truncated).
      expect(statSync(`${join(home, 'runlog.db')}-wal`, { throwIfNoEntry: false })?.size ?? 0).toBe(0);
      const view = await createRunlog({ home, supervise: false });
      expect(await view.supervision()).toMatchObject({ supervised: false, pid: process.pid });
      await view.close();
    },
  );
});

describe('metrics', () => {
  it('counts transitions, crashes, restarts, execution outcomes and step durations with bounded labels', async () => {
    const rl = await supervisor();
    await runlogInternals(rl).host.create('instance', 'inst_web', {
      type: 'instance.requested',
      data: { spec: instanceSpec() },
    });
    await rl.idle();
    await rl.send('instance', 'inst_web', {
      type: 'instance.crashed',
      data: { reason: 'exit', exitCode: 137, signal: 'SIGKILL', message: 'killed' },
    });
    await rl.idle();
    await runlogInternals(rl).host.create(
      'execution',
      'exec_01',
      requested('exec_01', 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/add'),
    );
    await runlogInternals(rl).host.create(
      'execution',
      'exec_02',
      requested('exec_02', 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/missing'),
    );
    await rl.idle();
    const text = await runlogInternals(rl).metrics!.text();
    expect(sample(text, 'runlog_instance_crashes_total{app="com.example.notes",reason="exit"}')).toBe(1);
    expect(sample(text, 'runlog_instance_restarts_total{app="com.example.notes"}')).toBe(1);
    expect(sample(text, 'runlog_actors{kind="instance",state="running"}')).toBe(1);
    expect(sample(text, 'runlog_transitions_total{machine="instance",from="spawning",to="healthy"}')).toBe(2);
    expect(sample(text, 'runlog_executions_total{runtime="unknown",outcome="succeeded",reason="none"}')).toBe(1);
    expect(sample(text, 'runlog_executions_total{runtime="unknown",outcome="failed",reason="resolution"}')).toBe(1);
    for (const step of ['resolve', 'materialize', 'start', 'run']) {
      expect(sample(text, `runlog_execution_step_duration_seconds_count{step="${step}"}`), step).toBeGreaterThanOrEqual(
        1,
      );
    }
    expect(sample(text, 'runlog_execution_step_duration_seconds_count{step="resolve"}')).toBe(2);
    expect(sample(text, 'runlog_store_append_duration_seconds_count')).toBeGreaterThan(5);
    expect(sample(text, 'runlog_store_events')).toBe(await runlogInternals(rl).store.lastSeq());
    expect(sample(text, 'runlog_store_size_bytes')).toBeGreaterThan(0);
    expect(sample(text, 'runlog_supervisor_heartbeat_age_seconds')).toBeGreaterThanOrEqual(0);
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    // No id of any actor in any label.
    expect(text).not.toMatch(/inst_web|exec_0/);
  });

  it('label values stay bounded: ill-formed or excess values become other', () => {
    const l = new BoundedLabel(2);
    expect([
      l.value('node22'),
      l.value('py'),
      l.value('deno'),
      l.value('node22'),
      l.value('a b'),
      l.value(undefined),
    ]).toEqual(['node22', 'py', 'other', 'node22', 'other', 'unknown']);
    expect(pdsEndpoint('http://127.0.0.1:2583/xrpc/com.atproto.sync.getRecord?did=did:plc:x')).toBe(
      'com.atproto.sync.getRecord',
    );
    expect(pdsEndpoint('http://127.0.0.1:2582/did:plc:abcdef')).toBe('plc.resolve');
    expect(pdsEndpoint('not a url')).toBe('other');
  });

  it('/metrics on the API listener needs the token; the metrics listener serves only GET /metrics, without one', async () => {
    const rl = await supervisor();
    await runlogInternals(rl).host.create('instance', 'inst_web', {
      type: 'instance.requested',
      data: { spec: instanceSpec() },
    });
    await rl.idle();
    const token = 'ab'.repeat(32);
    const server = await startServer({ runlog: rl, host: '127.0.0.1', port: 0, token });
    const metricsServer = await startMetricsServer(runlogInternals(rl).metrics!, '127.0.0.1', 0);
    try {
      expect((await fetch(`${server.url}metrics`)).status).toBe(401);
      expect((await fetch(`${server.url}metrics`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
      const ok = await fetch(`${server.url}metrics`, { headers: { authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(sample(await ok.text(), 'runlog_actors{kind="instance",state="running"}')).toBe(1);
      const open = await fetch(metricsServer.url);
      expect(open.status).toBe(200);
      expect(await open.text()).toContain('runlog_transitions_total{machine="instance",from="healthy",to="running"} 1');
      expect((await fetch(metricsServer.url.replace('/metrics', '/api/actors'))).status).toBe(404);
      expect((await fetch(metricsServer.url, { method: 'POST' })).status).toBe(405);
      // The inspector's data: whether the log is supervised, and the trace id (none: no SDK here).
      const view = (await (
        await fetch(`${server.url}api/actors/inst_web`, { headers: { authorization: `Bearer ${token}` } })
      ).json()) as Record<string, any>;
      expect(view.supervision).toMatchObject({ supervised: true, pid: process.pid });
      expect(view.traceId).toBeNull();
    } finally {
      await metricsServer.close();
      await server.close();
    }
  });

  it('--metrics-listen takes any IP address (read-only listener); --listen stays loopback only', () => {
    expect(parseListen('0.0.0.0:9464', { flag: '--metrics-listen', anyAddress: true })).toEqual({
      host: '0.0.0.0',
      port: 9464,
    });
    expect(() => parseListen('example.org:9464', { flag: '--metrics-listen', anyAddress: true })).toThrow(UsageError);
    expect(() => parseListen('0.0.0.0:9464')).toThrow(/binds only to loopback/);
  });
});

describe('traces (OpenTelemetry SDK, in-memory exporter)', () => {
  const setup = async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const rl = await supervisor({ tracerProvider: provider });
    return { rl, exporter };
  };
  const tree = (spans: ReadableSpan[], traceId: string) => {
    const mine = spans.filter((s) => s.spanContext().traceId === traceId);
    const root = mine.find((s) => !s.parentSpanContext)!;
    const children = mine
      .filter((s) => s.parentSpanContext?.spanId === root.spanContext().spanId)
      .sort((a, b) => Number(a.attributes['runlog.stream.version']) - Number(b.attributes['runlog.stream.version']));
    return { mine, root, children };
  };

  it(
    'an execution is one trace: a root span and a span per step, ' +
      'with actor id and stream versions; its id is in the first event',
    async () => {
      const { rl, exporter } = await setup();
      await runlogInternals(rl).host.create(
        'execution',
        'exec_01',
        requested('exec_01', 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/add'),
      );
      await rl.idle();
      const traceId = (await rl.events('exec_01'))[0]!.meta.traceId as string;
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect((await rl.inspect('exec_01')).traceId).toBe(traceId);
      const { mine, root, children } = tree(exporter.getFinishedSpans(), traceId);
      expect(root.name).toBe('execution');
      expect(root.attributes).toMatchObject({
        'runlog.actor.id': 'exec_01',
        'runlog.outcome': 'succeeded',
        'runlog.stream.version': (await rl.inspect('exec_01')).version,
      });
      expect(children.map((s) => s.name)).toEqual([
        'execution.resolving',
        'execution.materializing',
        'execution.starting',
        'execution.running',
      ]);
      expect(mine).toHaveLength(5); // nothing else in this trace
      for (const s of children) {
        expect(s.attributes['runlog.actor.id']).toBe('exec_01');
        expect(Number(s.attributes['runlog.stream.version.end'])).toBeGreaterThan(
          Number(s.attributes['runlog.stream.version']),
        );
      }
      // Progress inside a step is an event of its span (identity-resolved during resolving).
      expect(children[0]!.events.map((e) => e.name)).toContain('identity-resolved');
      expect(root.status.code).toBe(1); // OK
    },
  );

  it('a failed execution ends its trace with an error status; a spawn is a trace of its own', async () => {
    const { rl, exporter } = await setup();
    await runlogInternals(rl).host.create(
      'execution',
      'exec_02',
      requested('exec_02', 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/missing'),
    );
    await runlogInternals(rl).host.create('instance', 'inst_web', {
      type: 'instance.requested',
      data: { spec: instanceSpec() },
    });
    await rl.idle();
    const failed = tree(exporter.getFinishedSpans(), (await rl.events('exec_02'))[0]!.meta.traceId as string);
    expect(failed.root.status).toMatchObject({ code: 2, message: 'resolution' });
    expect(failed.children.map((s) => s.name)).toEqual(['execution.resolving']);
    const spawn = tree(exporter.getFinishedSpans(), (await rl.events('inst_web'))[0]!.meta.traceId as string);
    expect(spawn.root.name).toBe('instance.spawn');
    expect(spawn.root.attributes['runlog.outcome']).toBe('running');
    expect(spawn.children.map((s) => s.name)).toEqual(['instance.spawning', 'instance.healthy']);
  });

  it('with no SDK registered nothing is traced and no trace id is recorded', async () => {
    const rl = await supervisor();
    await runlogInternals(rl).host.create(
      'execution',
      'exec_03',
      requested('exec_03', 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/add'),
    );
    await rl.idle();
    expect((await rl.events('exec_03'))[0]!.meta.traceId).toBeUndefined();
    expect((await rl.inspect('exec_03')).traceId).toBeNull();
  });
});

describe('structured logs', () => {
  it('JSON lines with level, node, actor id and event version; --log-level filters; the TTY form is one short line', async () => {
    const lines: string[] = [];
    const logger = createLogger({
      level: parseLogLevel('debug'),
      stream: { write: (l: string) => lines.push(l) },
      pretty: false,
    });
    const rl = await supervisor({ log: (m) => logger.info(m) });
    const off = logActors(runlogInternals(rl).bus, logger);
    await runlogInternals(rl).host.create('instance', 'inst_web', {
      type: 'instance.requested',
      data: { spec: instanceSpec() },
    });
    await rl.idle();
    off();
    const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const t = records.find((r) => r.to === 'running')!;
    expect(t).toMatchObject({
      level: 'debug',
      actorId: 'inst_web',
      kind: 'instance',
      event: 'instance.running',
      from: 'healthy',
    });
    expect(typeof t.node).toBe('string');
    expect(t.version).toBe((await rl.inspect('inst_web')).version);
    expect(formatLine(lines.find((l) => l.includes('"to":"running"'))!)).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} DEBUG instance inst_web: healthy → running {2}actorId=inst_web kind=instance version=\d+/,
    );
    const quiet: string[] = [];
    const warnOnly = createLogger({
      level: parseLogLevel('warn'),
      stream: { write: (l: string) => quiet.push(l) },
      pretty: false,
    });
    warnOnly.info('not shown');
    warnOnly.warn('shown');
    expect(quiet.map((l) => JSON.parse(l).msg)).toEqual(['shown']);
    expect(() => parseLogLevel('loud')).toThrow(UsageError);
  });

  it("every line names the node it is given (serve --node), not the host's name", () => {
    const lines: string[] = [];
    const logger = createLogger({ node: 'node-x', stream: { write: (l: string) => lines.push(l) }, pretty: false });
    logger.info('one');
    logger.warn({ actorId: 'inst_1' }, 'two');
    expect(lines.map((l) => JSON.parse(l).node)).toEqual(['node-x', 'node-x']);
  });
});

// The heartbeat table comes with migration 3; a log file opened by this version has it.
describe('heartbeat table', () => {
  it('a fresh log has no heartbeat until a supervisor runs on it', async () => {
    const home = tempDir();
    const rl = await createRunlog({ home, db: join(home, 'x.db'), supervise: false, readOnly: false });
    expect(await runlogInternals(rl).store.readHeartbeat()).toBeNull();
    await rl.close();
  });
});
