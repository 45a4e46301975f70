import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RAW_PS, writeActors } from '../../../bench/cli.bench.ts';
import { main } from '../../../src/cli/main.ts';
import { capture } from '../../support/cli-in-process.ts';
import { freshDirs } from '../../support/tmp.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const dir = freshDirs('runlog-bench-ps-');

describe("the cli.ps bench's raw side", () => {
  it('prints what runlog ps --json prints, the archived field included, so the bench can compare them', async () => {
    const db = join(dir(), 'runlog.db');
    await writeActors(db, 3);
    const ps = capture();
    expect(await main(['ps', '--json', '--db', db], ps.factory)).toBe(0);
    const ours = JSON.parse(ps.stdout()) as Record<string, unknown>[];
    expect(ours).toHaveLength(3);
    expect(ours[0]).toHaveProperty('archived', null);
    // The same node -e script the bench runs, from the repository (where better-sqlite3 resolves).
    const raw = spawnSync(process.execPath, ['-e', RAW_PS, db], { cwd: REPO, encoding: 'utf8' });
    expect(raw.status, raw.stderr).toBe(0);
    // The bench's own check: the same JSON, key for key and in the same order.
    expect(JSON.stringify(JSON.parse(raw.stdout))).toBe(JSON.stringify(ours));
  });
});
