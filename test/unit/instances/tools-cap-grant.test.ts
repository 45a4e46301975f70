// The cap-grant fast path: runlog.json edited → AppRegistry (fs.watch) reports `changed` → re-provisioning
// the instance's tools dir grants/revokes without a respawn. Also the registry's other events.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppRegistry, type AppRegistryEvent } from '../../../src/adapters/apps/app-registry.ts';
import { loadManifest } from '../../../src/adapters/apps/load-manifest.ts';
import { provisionToolsDir } from '../../../src/adapters/tools/provision.ts';
import { ValidationError } from '../../../src/domain/errors.ts';

let root: string;
let apps: string;
let registry: AppRegistry;
const events: AppRegistryEvent[] = [];
const waiters: (() => void)[] = [];

const writeApp = (appId: string, manifest: Record<string, unknown>, viaRename = false): void => {
  const dir = join(apps, appId);
  mkdirSync(dir, { recursive: true });
  const text = JSON.stringify({ appId, ...manifest });
  if (viaRename) {
    writeFileSync(join(dir, '.runlog.json.swp'), text); // how editors save
    renameSync(join(dir, '.runlog.json.swp'), join(dir, 'runlog.json'));
  } else writeFileSync(join(dir, 'runlog.json'), text);
};
const next = async (pred: (e: AppRegistryEvent) => boolean): Promise<AppRegistryEvent> => {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const i = events.findIndex(pred);
    if (i >= 0) return events.splice(i, 1)[0]!;
    if (Date.now() > deadline)
      throw new Error(`no such registry event; got ${JSON.stringify(events.map((e) => e.type))}`);
    await new Promise<void>((r) => {
      waiters.push(r);
      setTimeout(r, 50);
    });
  }
};

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'runlog-apps-'));
  apps = join(root, 'apps');
  mkdirSync(apps);
  writeApp('com.example.hello', { tools: ['bash'] });
  registry = new AppRegistry({ appsDir: apps, debounceMs: 20 });
  registry.on((e) => {
    events.push(e);
    waiters.splice(0).forEach((w) => w());
  });
  await registry.start();
});
afterEach(() => {
  registry.close();
  events.length = 0;
  rmSync(root, { recursive: true, force: true });
});

describe('AppRegistry + provisionToolsDir (cap grant)', () => {
  it('a tools[] edit reaches the instance allowlist without a respawn', async () => {
    expect(await next((e) => e.type === 'added')).toMatchObject({
      appId: 'com.example.hello',
      manifest: { tools: ['bash'] },
    });
    const all = join(root, 'toolchain');
    mkdirSync(all);
    for (const t of ['bash', 'git', 'claude']) writeFileSync(join(all, t), '');
    const mine = join(root, 'instances/i1/tools');
    provisionToolsDir(mine, all, registry.get('com.example.hello')!.manifest.tools);
    expect(readdirSync(mine)).toEqual(['bash']);

    writeApp('com.example.hello', { tools: ['bash', 'git', 'claude-code'] }, true); // `runlog cap grant` / an editor
    const changed = await next((e) => e.type === 'changed');
    expect(changed).toMatchObject({
      manifest: { tools: ['bash', 'git', 'claude-code'] },
      previous: { tools: ['bash'] },
    });
    provisionToolsDir(mine, all, (changed as { manifest: { tools: string[] } }).manifest.tools);
    expect(readdirSync(mine).sort()).toEqual(['bash', 'claude', 'git']);

    writeApp('com.example.hello', { tools: ['bash'] });
    const revoked = await next((e) => e.type === 'changed');
    expect(
      provisionToolsDir(mine, all, (revoked as { manifest: { tools: string[] } }).manifest.tools).removed.sort(),
    ).toEqual(['claude', 'git']);
  });

  it('reports apps added, broken (every issue), fixed and removed; unchanged saves are silent', async () => {
    await next((e) => e.type === 'added');
    writeApp('com.example.two', { sandbox: 'container' });
    expect(await next((e) => e.type === 'added' && e.appId === 'com.example.two')).toMatchObject({
      manifest: { sandbox: 'container' },
    });

    writeApp('com.example.two', { sandbox: 'vm', tools: ['kubectl'] });
    const bad = await next((e) => e.type === 'invalid');
    expect(bad.type === 'invalid' && bad.error.issues).toHaveLength(2);
    expect(registry.get('com.example.two')).toBeUndefined();
    expect(registry.problems().map((p) => p.appId)).toEqual(['com.example.two']);

    writeApp('com.example.two', { sandbox: 'container' });
    await next((e) => e.type === 'added' && e.appId === 'com.example.two');
    writeApp('com.example.two', { sandbox: 'container' }); // same content again
    await new Promise((r) => setTimeout(r, 200));
    expect(events.filter((e) => e.appId === 'com.example.two')).toEqual([]);

    rmSync(join(apps, 'com.example.two'), { recursive: true });
    expect(await next((e) => e.type === 'removed')).toMatchObject({ appId: 'com.example.two' });
    expect(registry.list().map((a) => a.appId)).toEqual(['com.example.hello']);
  });
});

describe('loadManifest', () => {
  it('checks the entrypoint file on disk and names a missing runlog.json', () => {
    writeApp('com.example.raw', { runtime: 'raw' });
    const dir = join(apps, 'com.example.raw');
    expect(() => loadManifest(dir)).toThrow(
      `[ProotRunner] app 'com.example.raw' has runtime: 'raw' but no entrypoint file at ${dir}/entrypoint.sh`,
    );
    writeFileSync(join(dir, 'entrypoint.sh'), 'exec node server.mjs\n');
    expect(loadManifest(dir).runtime).toBe('raw');
    mkdirSync(join(apps, 'com.example.empty'));
    const err = (() => {
      try {
        loadManifest(join(apps, 'com.example.empty'));
      } catch (e) {
        return e as ValidationError;
      }
    })();
    expect(err).toBeInstanceOf(ValidationError);
    expect(err!.code).toBe('MANIFEST_MISSING');
  });
});
