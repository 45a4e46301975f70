// When the kernel refuses to watch the apps workspace (the user's inotify instances used up: EMFILE), the
// supervisor does not die: the app registry polls instead, says so in the log and in a metric, and a manifest
// edit still reaches a running instance. The refusal is injected (a watch factory that throws as fs.watch does):
// using up the real inotify instances would starve every process of the user on this machine.
import { mkdirSync, writeFileSync, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AppRegistry, type AppRegistryEvent, type WatchFactory } from '../../../src/adapters/apps/app-registry.ts';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { fakeEffects, instanceSpec } from '../../support/browser.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

/** What fs.watch throws when inotify_init1 fails with EMFILE. */
const emfile = (): never => {
  throw Object.assign(new Error('EMFILE: too many open files, watch'), {
    code: 'EMFILE',
    errno: -24,
    syscall: 'watch',
  });
};
const refuseAll: WatchFactory = () => emfile();

const writeApp = (apps: string, appId: string, tools: string[]): void => {
  mkdirSync(join(apps, appId), { recursive: true });
  writeFileSync(join(apps, appId, 'runlog.json'), JSON.stringify({ appId, tools }));
};

const until = async (what: string, ok: () => boolean): Promise<void> => {
  for (const end = Date.now() + 10_000; !ok();) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

const registries: AppRegistry[] = [];
const runlogs: Runlog[] = [];
afterEach(async () => {
  for (const r of registries.splice(0)) r.close();
  for (const rl of runlogs.splice(0)) await rl.close();
});

describe('an apps workspace the kernel refuses to watch', () => {
  it('the registry polls instead, says why once, and still reports a manifest edit', async () => {
    const apps = join(tempDir(), 'apps');
    writeApp(apps, 'com.example.hello', ['bash']);
    const said: string[] = [];
    const events: AppRegistryEvent[] = [];
    const registry = new AppRegistry({
      appsDir: apps,
      debounceMs: 10,
      pollMs: 20,
      watch: refuseAll,
      onPolling: (m) => said.push(m),
    });
    registries.push(registry);
    registry.on((e) => events.push(e));
    await registry.start();
    expect(registry.mode).toBe('polling');
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(
      new RegExp(
        String.raw`cannot watch .*apps \(EMFILE: the user's inotify instances or watches are used up ` +
          String.raw`.*max_user_instances.*\); rescanning the apps every 20 ms`,
      ),
    );
    expect(registry.list().map((a) => a.appId)).toEqual(['com.example.hello']);
    writeApp(apps, 'com.example.hello', ['bash', 'git']);
    await until('the edit to be noticed', () => events.some((e) => e.type === 'changed'));
    expect(events.find((e) => e.type === 'changed')).toMatchObject({
      appId: 'com.example.hello',
      manifest: { tools: ['bash', 'git'] },
    });
    expect(said).toHaveLength(1);
  });

  it("an app directory's watch refused (the root's granted) turns the registry to polling too", async () => {
    const apps = join(tempDir(), 'apps');
    writeApp(apps, 'com.example.hello', ['bash']);
    const granted: FSWatcher[] = [];
    const rootOnly: WatchFactory = (dir, listener) => {
      if (dir !== apps) return emfile();
      const w = { close: () => undefined, on: () => w } as unknown as FSWatcher;
      granted.push(w);
      void listener;
      return w;
    };
    const said: string[] = [];
    const registry = new AppRegistry({ appsDir: apps, pollMs: 20, watch: rootOnly, onPolling: (m) => said.push(m) });
    registries.push(registry);
    const events: AppRegistryEvent[] = [];
    registry.on((e) => events.push(e));
    await registry.start();
    expect(granted).toHaveLength(1);
    expect(registry.mode).toBe('polling');
    expect(said[0]).toMatch(/cannot watch .*com\.example\.hello \(EMFILE/);
    writeApp(apps, 'com.example.hello', ['git']);
    await until('the edit to be noticed', () => events.some((e) => e.type === 'changed'));
  });

  it('a supervisor starts anyway, logs and counts it, and a manifest edit still reaches a running instance', async () => {
    const home = tempDir();
    const apps = join(home, 'workspace', 'apps');
    writeApp(apps, 'com.example.notes', ['curl']);
    const lines: string[] = [];
    const rl = await createRunlog({
      home,
      effects: fakeEffects(),
      reconcile: false,
      engineWatch: false,
      appWatch: refuseAll,
      log: (m) => lines.push(m),
    });
    runlogs.push(rl);
    expect(lines.filter((l) => l.startsWith('apps: cannot watch'))).toHaveLength(1);
    expect(await runlogInternals(rl).metrics!.registry.getSingleMetricAsString('runlog_app_watch_polling')).toMatch(
      /^runlog_app_watch_polling 1$/m,
    );
    await runlogInternals(rl).host.create('instance', 'inst_web', {
      type: 'instance.requested',
      data: { spec: instanceSpec() },
    });
    await rl.idle();
    writeApp(apps, 'com.example.notes', ['curl', 'git']);
    // Polled (every 2 s): the edit becomes a grant on the instance's stream, as a watched edit does.
    await until(
      'the grant',
      () => runlogInternals(rl).host.get('instance', 'inst_web')!.snapshot.context.spec?.tools.includes('git') === true,
    );
    expect((await rl.events('inst_web')).map((e) => e.type)).toContain('instance.tool-granted');
  });
});
