// `kill -9` of a supervisor with 50 running containers, then a new supervisor on the same home: all 50 are
// adopted as they are (same containers, same start times, no restart, no lifecycle hook re-run).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunlog, type Runlog } from '../../src/supervisor/runlog.ts';
import { getJson, requireDockerAppBase, requireProot, until } from '../support/apps.ts';
import { startChild, type ChildSupervisor } from '../support/child-supervisor.ts';
import { docker } from '../support/docker.ts';

const COUNT = 50;
const LABELS = { 'runlog.test': '1' };
const PORTS = { min: 4900, max: 4999 };

// A minimal app (a few MB of heap): health with identity, lifecycle hooks recorded, nothing else.
const SERVER = `
import { createServer } from 'node:http';
const id = { appId: process.env.APP_ID, instanceId: process.env.APP_INSTANCE_ID };
const events = [];
createServer((req, res) => {
  res.setHeader('x-app-id', id.appId);
  res.setHeader('x-app-instance-id', id.instanceId);
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/api/lifecycle/health') {
    res.setHeader('content-type', 'application/json');
    return res.end(JSON.stringify({ status: 'ok', ...id, events }));
  }
  const hook = /^\\/api\\/lifecycle\\/(on[A-Z][a-z]+)$/.exec(path);
  if (hook && req.method === 'POST') {
    events.push(hook[1]);
    req.resume();
    res.writeHead(204);
    return res.end();
  }
  res.writeHead(404);
  res.end();
}).listen(Number(process.env.APP_PORT), '0.0.0.0');
process.on('SIGTERM', () => process.exit(0));
`;

let root: string;
let home: string;
let network: string;
let appDir: string;
let c: ChildSupervisor | null = null;
let rl: Runlog | null = null;

beforeAll(async () => {
  requireProot();
  await requireDockerAppBase();
  root = mkdtempSync(join(tmpdir(), 'runlog-kill50-'));
  home = join(root, 'home');
  mkdirSync(home);
  network = `runlog-k50-${process.pid}`;
  appDir = join(root, 'tiny');
  mkdirSync(appDir);
  writeFileSync(join(appDir, 'server.mjs'), SERVER);
  writeFileSync(
    join(appDir, 'entrypoint.sh'),
    '#!/bin/sh\nexec node --max-old-space-size=16 --max-semi-space-size=1 server.mjs\n',
    { mode: 0o755 },
  );
  writeFileSync(
    join(appDir, 'runlog.json'),
    JSON.stringify({
      appId: 'com.example.tiny',
      sandbox: 'container',
      runtime: 'raw',
      tools: [],
      lifecycle: { basePath: '' },
      restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 500, maxBackoffMs: 500 },
    }),
  );
});

afterAll(async () => {
  await c?.sigkill().catch(() => undefined);
  await rl?.close().catch(() => undefined);
  const mine = await docker.listContainers({ all: true, filters: JSON.stringify({ label: [`runlog.home=${home}`] }) });
  await Promise.all(
    mine.map((x) =>
      docker
        .getContainer(x.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
  await docker
    .getNetwork(network)
    .remove()
    .catch(() => undefined);
  if (root) rmSync(root, { recursive: true, force: true });
}, 180_000);

describe('kill -9 with 50 running containers', () => {
  it('all 50 are adopted on restart, none restarted', async () => {
    c = startChild({ home, labels: LABELS, network, portRange: PORTS, healthTimeoutMs: 60_000, killGraceMs: 2000 });
    expect(await c.ready, c.stderr()).toBe(true);
    const spawned: { id: string; context: any }[] = [];
    for (let i = 0; i < COUNT; i += 5) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(5, COUNT - i) }, () =>
          c!.request<{ id: string; state: string; context: any }>('spawn', { appDir }),
        ),
      );
      for (const v of batch) expect(v.state).toBe('running');
      spawned.push(...batch);
    }
    const before = new Map<string, { containerId: string; startedAt: string }>();
    for (const v of spawned) {
      const info = await docker.getContainer(v.context.containerId).inspect();
      before.set(v.id, { containerId: info.Id, startedAt: info.State.StartedAt });
    }
    expect(before.size).toBe(COUNT);

    await c.sigkill(); // kill -9: no cleanup, nothing flushed
    expect((await c.exited).signal).toBe('SIGKILL');

    const log: string[] = [];
    rl = await createRunlog({
      home,
      labels: LABELS,
      containerNetwork: network,
      portRange: PORTS,
      killGraceMs: 2000,
      watchApps: false,
      log: (m) => log.push(m),
    });
    const r = rl;
    await until(
      'all running',
      async () => (await r.list({ kind: 'instance' })).filter((a) => a.state === 'running').length === COUNT,
      60_000,
      100,
    );
    expect(log.join('\n')).toContain(`reconciled ${COUNT} actors (${COUNT} adopted)`);

    for (const [id, b] of before) {
      const types = (await r.events(id)).map((e) => e.type);
      expect(types).toEqual([
        'instance.requested',
        'instance.spawned',
        'instance.healthy',
        'instance.running',
        'instance.adopted',
        'instance.running',
      ]);
      expect((await r.inspect(id)).context).toMatchObject({ adopted: true, containerId: b.containerId, restarts: 0 });
      const info = await docker.getContainer(b.containerId).inspect();
      expect({ running: info.State.Running, startedAt: info.State.StartedAt, restarts: info.RestartCount }).toEqual({
        running: true,
        startedAt: b.startedAt,
        restarts: 0,
      });
    }
    const running = await docker.listContainers({ filters: JSON.stringify({ label: [`runlog.home=${home}`] }) });
    expect(running.map((x) => x.Id).sort()).toEqual([...before.values()].map((b) => b.containerId).sort());
    // No hook ran again: each app saw onCreate and onStart once, from the supervisor that was killed.
    const hooks = await Promise.all(
      [...before.keys()].map(async (id) => {
        const ctx = (await r.inspect(id)).context as any;
        return (await getJson(ctx.host, ctx.port, '/api/lifecycle/health')).body.events;
      }),
    );
    expect(hooks).toEqual(Array.from({ length: COUNT }, () => ['onCreate', 'onStart']));
    console.log(`[kill50] ${COUNT} containers adopted, 0 restarted, 0 hooks re-run`);
  }, 600_000);
});
