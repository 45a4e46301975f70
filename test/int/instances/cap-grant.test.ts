// `cap grant` has one meaning: per app. With a real supervisor and real PRoot instances: spawn a, grant a tool
// to the app, spawn b — both have it (a without a respawn, b from the start), the grant is an event in the log,
// the manifest is untouched; a revocation reaches both and every later spawn; an instance id is refused with
// the reason; a manifest edit keeps the app's grants.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { copyDereferenced } from '../../../src/adapters/apps/copy-dereferenced.ts';
import { collect } from '../../../src/store/port.ts';
import { getJson, HELLO_APP_DIR, requireProot, until } from '../../support/apps.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const APP = 'com.example.capgrant';
let root: string;
let rl: Runlog;
let src: string;

beforeAll(async () => {
  requireProot();
  root = mkdtempSync(join(tmpdir(), 'runlog-cap-'));
  src = join(root, 'app');
  copyDereferenced(HELLO_APP_DIR, src);
  const base = JSON.parse(readFileSync(join(HELLO_APP_DIR, 'runlog.json'), 'utf8'));
  writeFileSync(
    join(src, 'runlog.json'),
    JSON.stringify({ ...base, appId: APP, tools: ['bash', 'node'], restart: { policy: 'never' } }, null, 2),
  );
  rl = await createRunlog({
    home: join(root, 'home'),
    portRange: { min: 4700, max: 4799 },
    healthTimeoutMs: 20_000,
    killGraceMs: 2000,
    log: () => undefined,
  });
}, 60_000);

afterAll(async () => {
  for (const a of (await rl?.list()) ?? []) if (a.kind === 'instance') await rl.kill(a.id).catch(() => undefined);
  await rl?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const which = async (id: string, tool: string): Promise<string | null> => {
  const c = (await rl.inspect(id)).context as { host: string; port: number };
  return (await getJson(c.host, c.port, `/which?name=${tool}`)).body.path as string | null;
};
const tools = async (id: string): Promise<string[]> =>
  ((await rl.inspect(id)).context as { spec: { tools: string[] } }).spec.tools;

describe('cap grant is per app', () => {
  it('spawn a, grant, spawn b: both have the tool; revoke reaches both and later spawns; the manifest is untouched', async () => {
    const a = await rl.spawnApp({ appDir: src, instanceId: `a-${process.pid}` });
    expect(await which(a.id, 'git')).toBeNull();
    const installed = join(rl.home, 'workspace', 'apps', APP, 'runlog.json');
    const manifestBefore = readFileSync(installed, 'utf8');
    const pidA = (a.context as { pid: number }).pid;

    const granted = await rl.grant(APP, 'git');
    expect(granted).toMatchObject({
      appId: APP,
      tool: 'git',
      granted: true,
      tools: ['bash', 'node', 'git'],
      instances: [a.id],
    });
    expect((await collect(runlogInternals(rl).store.readStream(`app-${APP}`))).map((e) => [e.type, e.data])).toEqual([
      ['app.tool-granted', { appId: APP, tool: 'git', via: 'cap' }],
    ]);
    expect((await rl.events(a.id)).at(-1)).toMatchObject({
      type: 'instance.tool-granted',
      data: { tool: 'git', via: 'cap' },
    });
    expect(await until('git on a', () => which(a.id, 'git'))).toBe('/aura/my-tools/git');
    expect(((await rl.inspect(a.id)).context as { pid: number }).pid).toBe(pidA); // no respawn

    // The later spawn starts with the app's allowlist (the source manifest did not change: the installed copy is kept).
    const b = await rl.spawnApp({ appDir: src, instanceId: `b-${process.pid}` });
    expect(await tools(b.id)).toEqual(['bash', 'node', 'git']);
    expect(await tools(a.id)).toEqual(['bash', 'node', 'git']);
    expect(await which(b.id, 'git')).toBe('/aura/my-tools/git');
    expect(readFileSync(installed, 'utf8')).toBe(manifestBefore);
    expect(readFileSync(join(src, 'runlog.json'), 'utf8')).not.toContain('git');

    // A manifest edit in the workspace (the registry watcher) keeps the grant: tools[] + the app's grants.
    writeFileSync(
      installed,
      JSON.stringify({ ...JSON.parse(manifestBefore), tools: ['bash', 'node', 'curl'] }, null, 2),
    );
    await until('curl reaches a', async () => (await tools(a.id)).includes('curl'), 10_000);
    expect((await tools(a.id)).sort()).toEqual(['bash', 'curl', 'git', 'node']);

    // Revoking reaches every instance and every later spawn.
    const revoked = await rl.revoke(APP, 'git');
    expect(revoked.instances.sort()).toEqual([a.id, b.id].sort());
    expect(revoked.tools).not.toContain('git');
    await until('git gone from a', async () => (await which(a.id, 'git')) === null);
    await until('git gone from b', async () => (await which(b.id, 'git')) === null);
    const c = await rl.spawnApp({ appDir: src, instanceId: `c-${process.pid}` });
    expect(await tools(c.id)).not.toContain('git');
  });

  it('refuses an instance id, naming the app to grant to; refuses an unknown app and an unknown tool', async () => {
    const a = (await rl.list()).find((r) => r.kind === 'instance')!;
    await expect(rl.grant(a.id, 'git')).rejects.toMatchObject({
      code: 'CAP_TAKES_APP_ID',
      message: expect.stringContaining(`runlog cap grant ${APP} git`),
    });
    await expect(rl.grant('com.example.never-spawned', 'git')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(rl.grant(APP, 'rm-rf')).rejects.toMatchObject({ code: 'TOOL_UNKNOWN' });
    expect(await collect(runlogInternals(rl).store.readStream(`app-${APP}`))).toHaveLength(2); // the refused ones recorded nothing
  });
});
