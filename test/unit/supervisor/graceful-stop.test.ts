// Closing a supervisor while a spawn is in flight: the caller waiting for the spawn is answered HOST_CLOSED at
// once (its one-minute wait timer no longer holds the process), and the PRoot instance being started is recorded
// suspended, not crashed, so its next start spawns it again with its crash budget untouched.
import { describe, expect, it } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { HELLO_APP_DIR } from '../../support/apps.ts';
import { fakeEffects } from '../../support/browser.ts';
import { codeOf } from '../../support/errors.ts';
import { freshDirs } from '../../support/tmp.ts';

const dir = freshDirs('runlog-graceful-unit-');

describe('closing a supervisor during a spawn', () => {
  it('answers the waiting spawn HOST_CLOSED and records the PRoot instance suspended', async () => {
    const home = dir();
    let release!: () => void;
    let ready!: () => void;
    const started = new Promise<void>((r) => (ready = r));
    const fake = fakeEffects();
    // A spawn that never gets healthy until the test lets it go (a health check that does not answer).
    fake.instance.spawn = () => {
      ready();
      return new Promise<void>((r) => (release = r));
    };
    const rl = await createRunlog({
      home,
      effects: fake,
      reconcile: false,
      watchApps: false,
      engineWatch: false,
      log: () => undefined,
    });
    const spawning = rl.spawnApp({ appDir: HELLO_APP_DIR, sandbox: 'proot', instanceId: 'inst_slow' });
    spawning.catch(() => undefined);
    await started;
    const closing = rl.close();
    expect(await codeOf(spawning)).toBe('HOST_CLOSED');
    release();
    await closing;
    const after = await createRunlog({ home, supervise: false });
    try {
      expect((await after.inspect('inst_slow')).state).toBe('suspended');
      expect((await after.events('inst_slow')).map((e) => e.type)).toEqual([
        'instance.requested',
        'instance.suspended',
      ]);
    } finally {
      await after.close();
    }
  });
});
