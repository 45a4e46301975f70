// App instances under the supervisor, in both sandboxes, against real PRoot and a real Docker Engine:
// spawn to running with the identity verified, crash detection with the exit in the event and on the bus,
// restart with backoff from timer events, tools granted without a respawn, and bad manifests refused.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { cleanupTestContainers } from '../../support/docker.ts';
import {
  alive,
  getJson,
  HELLO_APP_DIR,
  LIAR_SERVER,
  requireDockerAppBase,
  requireProot,
  until,
} from '../../support/apps.ts';

let root: string;
let rl: Runlog;
const crashed: { instanceId: string; crash: any }[] = [];

/** A copy of hello-app with manifest overrides, in a directory of its own (spawnApp installs it). */
function appDir(overrides: Record<string, unknown>, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(root, 'app-'));
  cpSync(HELLO_APP_DIR, dir, { recursive: true, dereference: true });
  const base = JSON.parse(readFileSync(join(HELLO_APP_DIR, 'runlog.json'), 'utf8'));
  writeFileSync(join(dir, 'runlog.json'), JSON.stringify({ ...base, ...overrides }, null, 2));
  for (const [f, text] of Object.entries(files))
    writeFileSync(join(dir, f), text, { mode: f.endsWith('.sh') ? 0o755 : 0o644 });
  return dir;
}

beforeAll(async () => {
  requireProot();
  await requireDockerAppBase();
  root = mkdtempSync(join(tmpdir(), 'runlog-inst-'));
  mkdirSync(join(root, 'home'));
  rl = await createRunlog({
    home: join(root, 'home'),
    labels: { 'runlog.test': '1' },
    containerNetwork: `runlog-test-${process.pid}`,
    portRange: { min: 4600, max: 4699 },
    healthTimeoutMs: 20_000,
    killGraceMs: 2000,
    log: () => undefined,
  });
  rl.on('app:crashed', (c) => crashed.push(c as never));
}, 120_000);

afterAll(async () => {
  for (const a of (await rl?.list()) ?? []) if (a.kind === 'instance') await rl.kill(a.id).catch(() => undefined);
  await rl?.close();
  await cleanupTestContainers({ 'runlog.test': '1', 'runlog.home': join(root, 'home') });
  // Networks of finished runs would pile up on a shared daemon until its address pools run out.
  const { docker } = await import('../../support/docker.ts');
  await docker
    .getNetwork(`runlog-test-${process.pid}`)
    .remove()
    .catch(() => undefined);
  if (root) rmSync(root, { recursive: true, force: true });
});

describe.each(['proot', 'container'] as const)('%s sandbox', (sandbox) => {
  const appId = `com.example.hello${sandbox === 'proot' ? 'p' : 'c'}`;
  let id: string;

  it('spawns the example app to running; its health identity matches', async () => {
    const view = await rl.spawnApp({ appDir: appDir({ appId, sandbox, tools: ['bash'] }) });
    id = view.id;
    expect(view.state).toBe('running');
    const ctx = view.context as any;
    expect(ctx.identity).toBe('match');
    const health = await getJson(ctx.host, ctx.port, '/api/lifecycle/health');
    expect(health.body).toMatchObject({ appId, instanceId: id });
    expect((await rl.events(id)).map((e) => e.type)).toEqual([
      'instance.requested',
      'instance.spawned',
      'instance.healthy',
      'instance.running',
    ]);
    // onCreate and onStart ran (the app records the hooks it received)
    expect(health.body.events).toEqual(['onCreate', 'onStart']);
  });

  it('a tool not in tools[] is not on PATH; after cap grant it is, without a respawn', async () => {
    const ctx = (await rl.inspect(id)).context as any;
    const before = await getJson(ctx.host, ctx.port, '/which?name=git');
    expect(before.body.path).toBeNull();
    await rl.grant(appId, 'git');
    const after = await until(
      'git on PATH',
      async () => (await getJson(ctx.host, ctx.port, '/which?name=git')).body.path,
    );
    expect(after).toBe('/aura/my-tools/git');
    expect((await rl.inspect(id)).context).toMatchObject({ pid: ctx.pid });
    expect((await rl.events(id)).at(-1)).toMatchObject({ type: 'instance.tool-granted', data: { tool: 'git' } });
    await rl.revoke(appId, 'git');
    await until('git gone', async () => (await getJson(ctx.host, ctx.port, '/which?name=git')).body.path === null);
  });

  it('killed from outside: crashed with the exit in the event, app:crashed, then restarted with backoff', async () => {
    const ctx = (await rl.inspect(id)).context as any;
    if (sandbox === 'proot') process.kill(-ctx.pid, 'SIGKILL');
    else await (await import('../../support/docker.ts')).docker.getContainer(ctx.containerId).kill();
    await until('crash recorded', async () => (await rl.events(id)).some((e) => e.type === 'instance.crashed'), 20_000);
    const crash = (await rl.events(id)).find((e) => e.type === 'instance.crashed')!;
    if (sandbox === 'container') expect(crash.data).toMatchObject({ reason: 'exit', exitCode: 137 });
    else expect(crash.data).toMatchObject({ reason: 'exit', signal: 'SIGKILL' });
    await until('app:crashed', () => crashed.find((c) => c.instanceId === id));
    // on-failure: the restart is a timer whose firing is an event, then a fresh spawn reaches running
    await until(
      'running again',
      async () => (await rl.inspect(id)).state === 'running' && (await rl.inspect(id)).version > 8,
      40_000,
    );
    const types = (await rl.events(id)).map((e) => e.type);
    const i = types.indexOf('instance.crashed');
    expect(types.slice(i, i + 6)).toEqual([
      'instance.crashed',
      'instance.restart-scheduled',
      'instance.restart-due',
      'instance.spawned',
      'instance.healthy',
      'instance.running',
    ]);
    const now = (await rl.inspect(id)).context as any;
    expect(now.restarts).toBe(1);
    expect(sandbox === 'proot' ? now.pid !== ctx.pid : now.containerId !== ctx.containerId).toBe(true);
  });

  it('stops gracefully (onStop, SIGTERM) and releases everything', async () => {
    const ctx = (await rl.inspect(id)).context as any;
    const view = await rl.stop(id);
    expect(view.state).toBe('stopped');
    expect((await rl.events(id)).at(-1)).toMatchObject({ type: 'instance.exited' });
    // What it printed stays readable once it has stopped (the first place to look after a stop or a crash).
    const lines: string[] = [];
    for await (const l of rl.logs(id)) lines.push(l.line);
    expect(lines.length).toBeGreaterThan(0);
    if (sandbox === 'proot') expect(alive(ctx.pid)).toBe(false);
    else {
      const { docker } = await import('../../support/docker.ts');
      const list = await docker.listContainers({
        all: true,
        filters: JSON.stringify({ label: [`runlog.stream=instance-${id}`] }),
      });
      expect(list.filter((c) => c.State === 'running')).toEqual([]);
    }
  });

  it('an app claiming another identity on its port fails the spawn loudly; nothing is left running', async () => {
    const liarId = `${appId}liar`;
    const dir = appDir(
      {
        appId: liarId,
        sandbox,
        runtime: 'raw',
        restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 100, maxBackoffMs: 100 },
      },
      { 'server.mjs': LIAR_SERVER },
    );
    const err = await rl.spawnApp({ appDir: dir }).catch((e) => e);
    expect(err).toMatchObject({ code: 'SPAWN_FAILED' });
    expect(err.message).toMatch(
      new RegExp(
        `${liarId.replace(/\./g, '\\.')} on port \\d+: health identity mismatch \\(expected ` +
          `appId=${liarId.replace(/\./g, '\\.')}, got appId=com\\.example\\.squatter\\)\\. ` +
          `Another process is likely squatting this port\\.`,
      ),
    );
    const view = await rl.inspect(err.details.instanceId);
    expect(view.state).toBe('crashed.down'); // a mismatch is not retried
    expect((view.context as any).lastCrash.reason).toBe('identity-mismatch');
    if (sandbox === 'container') {
      const { docker } = await import('../../support/docker.ts');
      const list = await docker.listContainers({
        all: true,
        filters: JSON.stringify({ label: [`runlog.stream=instance-${err.details.instanceId}`] }),
      });
      expect(list).toEqual([]);
    }
  });
});

describe('bad manifests are refused before anything is spawned', () => {
  it.each([
    ['unknown sandbox', { sandbox: 'vm' }, /sandbox/],
    ['bad appId', { appId: 'Not An Id' }, /appId/],
    ['tools not a list', { tools: 'bash' }, /tools/],
    ['unknown tool names', { tools: ['bash', 'rm-rf'] }, /rm-rf/],
  ])('%s', async (_name, overrides, message) => {
    const before = (await rl.list({ all: true })).length;
    const err = await rl.spawnApp({ appDir: appDir({ appId: 'com.example.bad', ...overrides }) }).catch((e) => e);
    expect(err.code).toMatch(/^MANIFEST_INVALID$/);
    expect(err.message).toMatch(message);
    expect((await rl.list({ all: true })).length).toBe(before);
  });

  it("raw without entrypoint.sh fails with the seed's text", async () => {
    const dir = appDir({ appId: 'com.example.noentry', runtime: 'raw' });
    rmSync(join(dir, 'entrypoint.sh'));
    const err = await rl.spawnApp({ appDir: dir }).catch((e) => e);
    expect(err.message).toContain("app 'com.example.noentry' has runtime: 'raw' but no entrypoint file at");
  });

  it('an unknown --sandbox override is refused, never downgraded', async () => {
    const err = await rl
      .spawnApp({ appDir: appDir({ appId: 'com.example.override' }), sandbox: 'chroot' as never })
      .catch((e) => e);
    expect(err.code).toBe('MANIFEST_INVALID');
  });
});
