// A real Prometheus scrapes a real `runlog serve` (a child process) while it spawns a PRoot instance, sees it
// crash and restart, runs two executions (one succeeds, one fails) and removes a stray container. Everything
// is asserted through Prometheus' own HTTP query API: the series arrived, with the values the log says.
// The Grafana dashboard's every panel expression runs against that Prometheus and must return series; the
// alerting rules pass `promtool check rules` and load into the same Prometheus.
// Needs: Docker, the registry and its runtime images, PRoot and its rootfs, Debian's prometheus (`npm run setup`).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishCode } from '../../../src/supervisor/executions/publishing.ts';
import { alive, HELLO_APP_DIR, requireDockerAppBase, requireProot, until } from '../../support/apps.ts';
import { cliArgs } from '../../support/cli.ts';
import { requireRegistry } from '../../support/docker.ts';
import { publishNodeRuntime, startTestPds, type TestPds } from '../../support/pds.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const RULES = join(REPO, 'ops/prometheus/runlog-alerts.yml');
const DASHBOARD = join(REPO, 'ops/grafana/runlog-dashboard.json');
const SETUP_HINT = "run `npm run setup` (as root) to install Debian's prometheus";
const POLICY = JSON.stringify({ archive: { maxEntries: 19_989 } });
const APP_ID = 'com.example.obs';
const CODE = `
export function greet(input) { return { greeting: 'Hello, ' + input.name + '!' }; }
export function boom() { throw new Error('boom'); }
`;

/** examples/hello-app with its manifest changed; its SDK symlink copied as the file it points to. */
function helloApp(overrides: Record<string, unknown>): string {
  const dir = mkdtempSync(join(root, 'app-'));
  for (const f of ['entrypoint.sh', 'server.mjs', 'runlog-app-sdk.mjs'])
    copyFileSync(join(HELLO_APP_DIR, f), join(dir, f));
  chmodSync(join(dir, 'entrypoint.sh'), 0o755);
  const base = JSON.parse(readFileSync(join(HELLO_APP_DIR, 'runlog.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'runlog.json'), JSON.stringify({ ...base, ...overrides }, null, 2));
  return dir;
}

function requirePrometheus(): void {
  for (const bin of ['/usr/bin/prometheus', '/usr/bin/promtool']) {
    if (!existsSync(bin)) throw new Error(`${bin} is missing: ${SETUP_HINT}`);
  }
}

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => res(port));
    });
  });
}

let root: string;
let home: string;
let pds: TestPds;
let serve: ChildProcess;
let serveErr = '';
let prom: ChildProcess;
let promErr = '';
let promUrl: string;
let api: { url: string; token: string };
let docker: Awaited<ReturnType<typeof requireDockerAppBase>>['docker'];
let appImage: string;
const expected = { crashReason: '', failReason: '', instancePid: 0 };

async function call<T = any>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(new URL(path, api.url), {
    method,
    headers: {
      authorization: `Bearer ${api.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as T };
}

interface PromSeries {
  metric: Record<string, string>;
  value: [number, string];
}

async function query(expr: string): Promise<PromSeries[]> {
  const res = await fetch(`${promUrl}/api/v1/query?${new URLSearchParams({ query: expr })}`);
  const body = (await res.json()) as {
    status: string;
    error?: string;
    data: { resultType: string; result: PromSeries[] };
  };
  if (body.status !== 'success') throw new Error(`Prometheus refused ${expr}: ${body.error}`);
  return body.data.result;
}

/** Waits until Prometheus has scraped a value of `expr` that `ok` accepts (scrapes are every second). */
async function eventually(expr: string, ok: (v: number[]) => boolean, what: string): Promise<number[]> {
  let last: number[] = [];
  try {
    return await until(
      what,
      async () => {
        last = (await query(expr)).map((s) => Number(s.value[1]));
        return ok(last) ? last : null;
      },
      30_000,
      500,
    );
  } catch (err) {
    throw new Error(
      `${what}: ${expr} last returned ${JSON.stringify(last)}\nrunlog serve stderr (tail):\n${serveErr.slice(-3000)}`,
      { cause: err },
    );
  }
}

beforeAll(async () => {
  requirePrometheus();
  requireProot();
  ({ docker, image: appImage } = await requireDockerAppBase());
  await requireRegistry();
  root = mkdtempSync(join(tmpdir(), 'runlog-prom-'));
  home = join(root, 'home');
  mkdirSync(home, { recursive: true });
  writeFileSync(join(home, 'operator-policy.json'), POLICY);
  pds = await startTestPds();
  const runtimeUri = await publishNodeRuntime(pds, `promrt-${process.pid}.test`);
  const author = await pds.createAccount(`promcode-${process.pid}.test`);
  const codeDir = mkdtempSync(join(root, 'code-'));
  writeFileSync(join(codeDir, 'index.mjs'), CODE);
  const codeUri = (
    await publishCode(author.publisher, {
      dir: codeDir,
      runtime: runtimeUri,
      entrypoint: 'index.mjs',
      atproto: { plcUrl: pds.plcUrl },
    })
  ).uri;

  // runlog serve, in its own process: the API (and /metrics behind its token) and a token-less metrics listener.
  const metricsPort = await freePort();
  serve = spawn(
    process.execPath,
    cliArgs(
      'serve',
      '--home',
      home,
      '--listen',
      '127.0.0.1:0',
      '--metrics-listen',
      `127.0.0.1:${metricsPort}`,
      '--plc',
      pds.plcUrl,
      '--log-level',
      'debug',
      '--json',
    ),
    {
      cwd: REPO,
      env: { ...process.env, RUNLOG_HOME: home },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  serve.stderr!.on('data', (c: Buffer) => (serveErr += c.toString()));
  const info = await new Promise<{ url: string; metricsUrl: string }>((res, rej) => {
    let out = '';
    serve.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      try {
        res(JSON.parse(out));
      } catch {
        // not complete yet
      }
    });
    serve.once('exit', (code) => rej(new Error(`runlog serve exited with ${code} before listening:\n${serveErr}`)));
  });
  api = { url: info.url, token: readFileSync(join(home, 'token'), 'utf8').trim() };
  expect(info.metricsUrl).toBe(`http://127.0.0.1:${metricsPort}/metrics`);

  // Prometheus with our config: one job through the API listener and its bearer token, one through --metrics-listen.
  const promPort = await freePort();
  const apiHost = new URL(info.url).host;
  mkdirSync(join(root, 'prom-data'));
  writeFileSync(
    join(root, 'prometheus.yml'),
    [
      'global: { scrape_interval: 1s, evaluation_interval: 1s }',
      `rule_files: [${JSON.stringify(RULES)}]`,
      'scrape_configs:',
      '  - job_name: runlog',
      `    static_configs: [{ targets: ["127.0.0.1:${metricsPort}"] }]`,
      '  - job_name: runlog-api',
      '    metrics_path: /metrics',
      `    authorization: { type: Bearer, credentials_file: ${JSON.stringify(join(home, 'token'))} }`,
      `    static_configs: [{ targets: ["${apiHost}"] }]`,
      '',
    ].join('\n'),
  );
  prom = spawn(
    '/usr/bin/prometheus',
    [
      `--config.file=${join(root, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(root, 'prom-data')}`,
      `--web.listen-address=127.0.0.1:${promPort}`,
    ],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  prom.stderr!.on('data', (c: Buffer) => (promErr = (promErr + c.toString()).slice(-20_000)));
  promUrl = `http://127.0.0.1:${promPort}`;
  await until(
    'prometheus ready',
    async () => (await fetch(`${promUrl}/-/ready`).catch(() => null))?.ok ?? false,
    30_000,
    200,
  ).catch((err: unknown) => {
    throw new Error(`prometheus did not become ready:\n${promErr}`, { cause: err });
  });

  // The workload: a spawn, a crash (SIGKILL of its process) and the restart that follows, two executions, a stray.
  const spawned = await call('POST', '/api/instances', {
    appDir: helloApp({
      appId: APP_ID,
      sandbox: 'proot',
      restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 200, maxBackoffMs: 400 },
    }),
  });
  expect(spawned.status, JSON.stringify(spawned.body)).toBe(201);
  const instanceId = spawned.body.id as string;
  expected.instancePid = spawned.body.summary.pid as number;
  process.kill(expected.instancePid, 'SIGKILL');
  const restarted = await until(
    'instance restarted',
    async () => {
      const v = (await call('GET', `/api/actors/${instanceId}`)).body;
      return v.state === 'running' && v.summary.pid !== expected.instancePid ? v : null;
    },
    30_000,
    100,
  );
  expected.crashReason = restarted.context.lastCrash.reason;

  const ok = await call('POST', '/api/executions', { uri: codeUri, handler: 'greet', input: { name: 'Ada' } });
  expect(ok.body.status, JSON.stringify(ok.body.failure)).toBe('succeeded');
  const bad = await call('POST', '/api/executions', { uri: codeUri, handler: 'boom', input: {} });
  expect(bad.body.status).toBe('failed');
  expected.failReason = bad.body.failure.reason;

  // A container labelled for this home that no stream owns: reconciliation removes it.
  const stray = await docker.createContainer({
    Image: appImage,
    Cmd: ['/bin/true'],
    Labels: {
      'runlog.home': home,
      'runlog.kind': 'instance',
      'runlog.stream': 'instance-inst_stray',
      'runlog.test': '1',
    },
  });
  const rec = await call('POST', '/api/reconcile', {});
  expect(rec.status, JSON.stringify(rec.body)).toBe(200);
  expect(
    await docker
      .getContainer(stray.id)
      .inspect()
      .catch(() => null),
  ).toBeNull();
}, 300_000);

afterAll(async () => {
  prom?.kill('SIGTERM');
  if (serve && serve.exitCode === null) {
    serve.kill('SIGTERM');
    await new Promise((r) => serve.once('exit', r));
  }
  if (expected.instancePid && alive(expected.instancePid)) process.kill(expected.instancePid, 'SIGKILL');
  if (docker) {
    for (const c of await docker.listContainers({ all: true, filters: { label: [`runlog.home=${home}`] } }))
      await docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined);
    for (const v of (await docker.listVolumes({ filters: { label: [`runlog.home=${home}`] } })).Volumes ?? [])
      await docker
        .getVolume(v.Name)
        .remove()
        .catch(() => undefined);
  }
  await pds?.close();
  if (root) rmSync(root, { recursive: true, force: true });
}, 60_000);

describe('Prometheus scrapes runlog serve', () => {
  it('both endpoints are scraped: the API listener with its bearer token, --metrics-listen without one', async () => {
    await eventually('up{job="runlog"}', (v) => v.length === 1 && v[0] === 1, 'the metrics listener is up');
    await eventually(
      'up{job="runlog-api"}',
      (v) => v.length === 1 && v[0] === 1,
      'the API listener is up (token from credentials_file)',
    );
    // Without the token the API listener refuses (/metrics is behind it there).
    expect((await fetch(new URL('/metrics', api.url))).status).toBe(401);
  });

  it('the spawn, the crash, the restart, the two executions and the reconciliation arrived with the right values', async () => {
    const j = '{job="runlog"';
    await eventually(
      `runlog_actors${j},kind="instance",state="running"}`,
      (v) => v[0] === 1,
      'one live running instance',
    );
    await eventually(
      `runlog_instance_crashes_total${j},app="${APP_ID}",reason="${expected.crashReason}"}`,
      (v) => v[0] === 1,
      'one crash',
    );
    await eventually(`runlog_instance_restarts_total${j},app="${APP_ID}"}`, (v) => v[0] === 1, 'one restart');
    await eventually(
      `runlog_instance_spawn_duration_seconds_count${j},sandbox="proot",outcome="running"}`,
      (v) => v[0] === 2,
      'two spawns reached running (the first and the restart)',
    );
    await eventually(
      `runlog_transitions_total${j},machine="instance",from="running",to="crashed.backoff"}`,
      (v) => v[0] === 1,
      'running → crashed.backoff once',
    );
    await eventually(
      `sum(runlog_executions_total${j},outcome="succeeded",reason="none"})`,
      (v) => v[0] === 1,
      'one execution succeeded',
    );
    await eventually(
      `sum(runlog_executions_total${j},outcome="failed",reason="${expected.failReason}"})`,
      (v) => v[0] === 1,
      `one execution failed (${expected.failReason})`,
    );
    await eventually(`sum(runlog_executions_total${j}})`, (v) => v[0] === 2, 'two executions in all');
    // The succeeded execution went through all four steps, the failed one at least to run.
    for (const step of ['resolve', 'materialize', 'start', 'run']) {
      await eventually(
        `runlog_execution_step_duration_seconds_count${j},step="${step}"}`,
        (v) => v[0] === 2,
        `two executions timed in step ${step}`,
      );
    }
    await eventually(
      `runlog_reconcile_actions_total${j},kind="instance",action="removed"}`,
      (v) => v[0] === 1,
      'the stray container removed',
    );
    await eventually(
      `sum(runlog_reconcile_runs_total${j}})`,
      (v) => v[0] === 2,
      'two reconciliation runs (start and the one asked for)',
    );
    await eventually(
      `sum(runlog_pds_request_duration_seconds_count${j},outcome="ok"})`,
      (v) => v[0]! > 0,
      'PDS requests observed',
    );
    const events = Number((await query(`runlog_store_events${j}}`))[0]!.value[1]);
    const health = await call('GET', '/api/health');
    expect(events).toBeLessThanOrEqual(health.body.lastSeq);
    expect(events).toBeGreaterThan(20);
    await eventually(`runlog_store_append_duration_seconds_count${j}}`, (v) => v[0]! > 10, 'appends timed');
    await eventually(`process_resident_memory_bytes${j}}`, (v) => v[0]! > 10_000_000, 'process metrics');
    // No label anywhere carries an actor, execution or container id.
    const names = (await (await fetch(`${promUrl}/api/v1/label/__name__/values`)).json()) as { data: string[] };
    for (const label of ['instance_id', 'execution_id', 'id', 'container']) {
      const values = (await (await fetch(`${promUrl}/api/v1/label/${label}/values`)).json()) as { data: string[] };
      expect(values.data, label).toEqual([]);
    }
    expect(names.data).toContain('runlog_transitions_total');
  });

  it('every panel of the Grafana dashboard returns series from this Prometheus', async () => {
    const dash = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    expect(dash.panels.length).toBeGreaterThanOrEqual(12);
    const empty: string[] = [];
    for (const panel of dash.panels) {
      for (const t of panel.targets) {
        // Rates need two scrapes in their window; give each expression a few seconds to fill.
        const got = await until(
          `panel ${panel.title}`,
          async () => ((await query(t.expr)).length > 0 ? true : null),
          15_000,
          500,
        ).catch(() => false);
        if (!got) empty.push(`${panel.title}: ${t.expr}`);
      }
    }
    expect(empty).toEqual([]);
  });

  it('the alerting rules pass promtool and load into Prometheus', async () => {
    const out = execFileSync('/usr/bin/promtool', ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(out).toContain('SUCCESS: 4 rules found');
    // Each alert fires on the series that should fire it, and not on healthy ones (promtool's rule unit tests).
    const tested = execFileSync('/usr/bin/promtool', ['test', 'rules', RULES.replace(/\.yml$/, '.test.yml')], {
      encoding: 'utf8',
    });
    expect(tested).toContain('SUCCESS');
    const rules = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as {
      data: { groups: { rules: { name: string; health: string }[] }[] };
    };
    const loaded = rules.data.groups.flatMap((g) => g.rules);
    expect(loaded.map((r) => r.name).sort()).toEqual([
      'RunlogCrashLoop',
      'RunlogExecutionFailureRatio',
      'RunlogReconcileFoundLostActors',
      'RunlogSupervisorDown',
    ]);
    await until(
      'rules evaluated',
      async () => {
        const r = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as typeof rules;
        const all = r.data.groups.flatMap((g) => g.rules);
        return all.every((x) => x.health === 'ok') ? true : null;
      },
      15_000,
      500,
    );
  });
});
