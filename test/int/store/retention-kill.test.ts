// An archive run killed with SIGKILL at each of its steps (a real child process, stopped dead there) leaves the log
// either untouched or fully archived, for every actor: never an actor half removed, never a log that will not open
// or verify; and a later run finishes the job.
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { inspectActor } from '../../../src/inspect/inspection.ts';
import { archiveLog } from '../../../src/supervisor/retention/retention.ts';
import { verifyLog } from '../../../src/inspect/verify-log.ts';
import type { ArchiveStep } from '../../../src/store/capabilities.ts';
import { SqlitePortStore } from '../../../src/store/sqlite/port-adapter.ts';
import { runCli } from '../../support/cli-in-process.ts';
import { writeRetentionLog, type BuiltActor } from '../../support/retention-log.ts';
import { tempDir } from '../../support/tmp.ts';

const STEPS = (
  [
    { step: 'planned', archived: false },
    { step: 'file-written', archived: false },
    { step: 'file-linked', archived: false },
    { step: 'removing', archived: false }, // inside the transaction: everything deleted, nothing committed
    { step: 'committed', archived: true },
    { step: 'vacuumed', archived: true },
  ] as { step: ArchiveStep; archived: boolean }[]
).map((s) => ({ ...s, outcome: s.archived ? 'fully archived' : 'untouched' }));

function runUntil(db: string, home: string, before: string, out: string, step: ArchiveStep): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, '../../support/archive-child.ts'), db, home, before, out, step],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (b: Buffer) => {
      err += b.toString();
      if (err.includes(`at ${step}\n`)) child.kill('SIGKILL');
    });
    child.on('exit', (_code, signal) =>
      signal === 'SIGKILL' ? resolve() : reject(new Error(`the archive child ended on its own before ${step}: ${err}`)),
    );
  });
}

describe('archive under SIGKILL', () => {
  let template: string;
  let actors: BuiltActor[];
  let truth: Map<string, { state: string; version: number; context: unknown }>;
  let before: string;

  beforeAll(async () => {
    const home = tempDir();
    actors = await writeRetentionLog(home, { ended: 40, live: 5, start: '2026-09-01T00:00:00.000Z' });
    template = join(home, 'runlog.db');
    const s = new SqlitePortStore(template, { readOnly: true });
    truth = new Map();
    for (const r of await s.listActors({ all: true })) {
      const v = await inspectActor(s, r.id);
      truth.set(r.id, { state: v.state, version: v.version, context: v.context });
    }
    await s.close();
    before = new Date(Date.parse(actors.filter((a) => !a.live)[24]!.endedAt) + 30_000).toISOString();
  }, 120_000);

  it.each(STEPS)(
    'killed at $step: the log is $outcome, for every actor',
    async ({ step, archived }) => {
      const home = tempDir();
      const db = join(home, 'runlog.db');
      copyFileSync(template, db);
      copyFileSync(`${template}-shutdown`, `${db}-shutdown`);
      const out = join(home, 'archive.jsonl.gz');
      await runUntil(db, home, before, out, step);

      // Opens as a writer (its checks: header, length, shutdown record, WAL, quick_check) and verifies clean.
      await new SqlitePortStore(db).close();
      expect(await verifyLog(db)).toMatchObject({ ok: true, findings: [] });
      const store = new SqlitePortStore(db, { readOnly: true });
      const candidates = actors.filter((a) => !a.live && a.endedAt < before);
      expect(candidates).toHaveLength(25);
      for (const a of actors) {
        const row = (await store.getActor(a.id))!;
        const gone = archived && candidates.includes(a);
        expect(await store.streamVersion(row.stream), `${a.id} after a kill at ${step}`).toBe(
          gone ? 0 : truth.get(a.id)!.version,
        );
        expect(Boolean(row.archived), `${a.id}: tombstone after a kill at ${step}`).toBe(gone);
      }
      await store.close();
      if (archived) {
        // The archive it points to is complete: each actor replays from it to its state.
        for (const a of candidates.filter((_, i) => i % 6 === 0)) {
          const rep = await runCli(['replay', '--file', out, a.id, '--json']);
          expect(rep.code, rep.stderr()).toBe(0);
          expect(JSON.parse(rep.stdout())).toMatchObject({
            state: truth.get(a.id)!.state,
            to: truth.get(a.id)!.version,
            context: truth.get(a.id)!.context,
          });
        }
      } else {
        // a temp file at most, never the log's business
        expect(readdirSync(home).filter((f) => f.includes('.partial-')).length).toBeLessThanOrEqual(1);
      }

      // A later run finishes (or has nothing left to do), and the log still verifies.
      const w = new SqlitePortStore(db);
      const again = await archiveLog(w, { before, home, out: join(home, 'again.jsonl.gz') });
      await w.close();
      expect(again.actors).toBe(archived ? 0 : 25);
      expect(existsSync(join(home, 'again.jsonl.gz'))).toBe(!archived);
      expect(await verifyLog(db)).toMatchObject({ ok: true, findings: [] });
    },
    120_000,
  );
});
