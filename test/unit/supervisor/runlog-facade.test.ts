// The public Runlog is a facade of calls: the store, the writer lock, the actor host, the bus, the metrics and the
// archiving capability are not on it, and runlog's own code reaches them through runlogInternals() only.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';
import { tempDir } from '../../support/tmp.ts';

const open: Runlog[] = [];
afterEach(async () => {
  for (const rl of open.splice(0)) await rl.close();
});

async function writable(home: string): Promise<Runlog> {
  const rl = await createRunlog({ home, supervise: false, readOnly: false, log: () => undefined });
  open.push(rl);
  return rl;
}

describe('the Runlog facade', () => {
  it('carries no internal services; runlogInternals() reaches the ones createRunlog built', async () => {
    const rl = await writable(tempDir());
    for (const member of ['store', 'writer', 'host', 'bus', 'metrics', 'archiving'])
      expect(Object.keys(rl)).not.toContain(member);
    const internals = runlogInternals(rl);
    expect(await internals.store.lastSeq()).toBe(0);
    expect(internals.writer?.held).toBe(true);
    expect(internals.host.live()).toEqual([]);
    expect(internals.metrics).toBeNull(); // not supervising
  });

  it('a Runlog createRunlog did not make has no internals: INTERNAL', async () => {
    const rl = await writable(tempDir());
    expect(() => runlogInternals({ ...rl })).toThrow(expect.objectContaining({ code: 'INTERNAL' }));
  });

  it('archive() runs the log archiving: nothing ended, no file', async () => {
    const home = tempDir();
    const rl = await writable(home);
    const out = join(home, 'archive.ndjson');
    const r = await rl.archive({ before: new Date().toISOString(), out });
    expect(r).toMatchObject({ file: null, actors: 0, events: 0 });
    expect(existsSync(out)).toBe(false);
  });
});
