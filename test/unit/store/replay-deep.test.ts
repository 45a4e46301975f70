// `replay <id> --to <v>` starts from the newest snapshot at or before v (the ones a newer snapshot replaced are kept,
// migration 7) and folds only the events after it: the same state and context as folding every event.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { SNAPSHOT_EVERY } from '../../../src/inspect/snapshots.ts';
import { verifyLog } from '../../../src/inspect/verify-log.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { runCli } from '../../support/cli-in-process.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const spec = (id: string): InstanceSpec => ({
  instanceId: id,
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 10, maxBackoffMs: 20, resetAfterMs: 1000 },
});

describe('replay --to from snapshots', () => {
  it('equals the full fold at every version tried, and starts from the snapshot at or before it', async () => {
    const home = tempDir();
    const rl = await createRunlog({ home, supervise: false, readOnly: false });
    await runlogInternals(rl).host.create('instance', 'inst_deep', {
      type: 'instance.requested',
      data: { spec: spec('inst_deep') },
    });
    for (let i = 0; i < 3 * SNAPSHOT_EVERY + 40; i++)
      await rl.send('instance', 'inst_deep', {
        type: i % 2 ? 'instance.tool-revoked' : 'instance.tool-granted',
        data: { tool: `t${i % 7}` },
      });
    await rl.close();
    const db = join(home, 'runlog.db');
    const store = new SqliteEventStore(db, { readOnly: true });
    expect(store.snapshotAtOrBefore('instance-inst_deep', 250)?.version).toBe(2 * SNAPSHOT_EVERY);
    expect(store.snapshotAtOrBefore('instance-inst_deep', 99)).toBeUndefined();
    store.close();
    expect(await verifyLog(db)).toMatchObject({ ok: true, findings: [] });

    // The reference: the exported history replayed offline, which folds every event from the first.
    const exported = await runCli(['export', 'inst_deep', '--home', home]);
    const file = join(home, 'deep.jsonl');
    writeFileSync(file, `${exported.stdout()}\n`);
    for (const to of [1, 99, 100, 101, 250, 300, 340]) {
      const fromLog = JSON.parse(
        (await runCli(['replay', 'inst_deep', '--to', String(to), '--home', home, '--json'])).stdout(),
      ) as { from?: number; to: number; state: string; context: unknown; steps: { version: number }[] };
      const full = JSON.parse((await runCli(['replay', '--file', file, '--to', String(to), '--json'])).stdout()) as {
        to: number;
        state: string;
        context: unknown;
      };
      expect({ to: fromLog.to, state: fromLog.state, context: fromLog.context }, `--to ${to}`).toEqual({
        to: full.to,
        state: full.state,
        context: full.context,
      });
      const snap = to >= SNAPSHOT_EVERY ? Math.floor(to / SNAPSHOT_EVERY) * SNAPSHOT_EVERY : undefined;
      expect(fromLog.from, `--to ${to} starts from the snapshot at v${snap}`).toBe(snap);
      expect(fromLog.steps[0]?.version ?? to + 1).toBe((snap ?? 0) + 1);
    }
  });
});
