// The retention specs every store must meet (issue 15, and #14 for the cluster's store), run against SQLite
// (sqlite.unit.test.ts) and the real PostgreSQL (postgres.int.test.ts) through the same CLI and the same
// readers: archive moves ended actors into an archive that `replay --file` reads, tombstones keep them in
// `ps --all` and `inspect`, verify carries the chain across the holes (later runs join them; one archives the
// log's tail and appends continue after it) and checks the archives (changed: ARCHIVE_DAMAGED; moved:
// ARCHIVE_NOT_FOUND, found with --archives), and a deleted snapshot is SNAPSHOT_MISSING. What only a shared log
// has (ARCHIVE_BUSY, other nodes appending, a killed archiver's session) is in test/int/postgres/retention-pg.test.ts.
// An actor's answer is what `runlog inspect --json` prints; the log itself is read through the store port.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { collect, type EventStorePort } from '../../../src/store/port.ts';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { runCli } from '../../support/cli-in-process.ts';
import { writeRetentionLog, type BuiltActor } from '../../support/retention-log.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

export interface RetentionLog {
  home: string;
  /** How the CLI names this log (`--home <dir>` or `--store <url>`). */
  where: string[];
  /** Reads the log through the store port, as a supervisor's store does (opened for `fn`, closed after). */
  read<T>(fn: (store: EventStorePort) => Promise<T>): Promise<T>;
  /** Deletes the newest snapshot of a stream behind runlog's back. */
  deleteSnapshot(stream: string): Promise<void>;
}

export interface RetentionBackend {
  /** A log under `home` (or in a fresh schema), written with `writeRetentionLog`'s actors (`store` passed on). */
  newLog(home: string): Promise<{ store?: string; log: Omit<RetentionLog, 'home'> }>;
}

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

type Truth = Map<string, { state: string; version: number; context: unknown }>;

const cutoffAfter = (actors: BuiltActor[], n: number): string =>
  new Date(Date.parse(actors.filter((a) => !a.live)[n - 1]!.endedAt) + 30_000).toISOString();

export function retentionSpecs(name: string, backend: RetentionBackend): void {
  async function built(
    ended: number,
    live: number,
  ): Promise<{ log: RetentionLog; actors: BuiltActor[]; appendNew: (id: string) => Promise<number> }> {
    const home = tempDir();
    const { store, log } = await backend.newLog(home);
    const actors = await writeRetentionLog(home, {
      ended,
      live,
      start: '2026-09-01T00:00:00.000Z',
      ...(store ? { store } : {}),
    });
    const full = { ...log, home };
    // A new actor through the real host (its projection row too), after everything else: its first position.
    const appendNew = async (id: string): Promise<number> => {
      const rl = await createRunlog({ home, supervise: false, readOnly: false, ...(store ? { store } : {}) });
      try {
        await runlogInternals(rl).host.create('instance', id, {
          type: 'instance.requested',
          data: { spec: spec(id) },
        } as never);
      } finally {
        await rl.close();
      }
      return full.read(async (s) => (await collect(s.readStream(`instance-${id}`)))[0]!.seq);
    };
    return { log: full, actors, appendNew };
  }
  /** What `runlog inspect --json` says of one actor. */
  async function inspect(
    log: RetentionLog,
    id: string,
  ): Promise<{ state: string; version: number; context: unknown; archived?: { file: string } }> {
    const r = await runCli(['inspect', ...log.where, id, '--json']);
    expect(r.code, r.stderr()).toBe(0);
    return JSON.parse(r.stdout());
  }
  async function answers(log: RetentionLog): Promise<Truth> {
    const truth: Truth = new Map();
    for (const r of await log.read((s) => s.listActors({ all: true }))) {
      const v = await inspect(log, r.id);
      truth.set(r.id, { state: v.state, version: v.version, context: v.context });
    }
    return truth;
  }
  async function archive(log: RetentionLog, before: string, out: string) {
    const r = await runCli(['archive', ...log.where, '--before', before, '--out', out, '--json']);
    expect(r.code, r.stderr()).toBe(0);
    return JSON.parse(r.stdout()) as { file: string | null; actors: number; events: number; lastSeq: number | null };
  }
  async function verify(log: RetentionLog, extra: string[] = []): Promise<{ code: number; report: any }> {
    const r = await runCli(['verify', ...log.where, '--json', ...extra]);
    return { code: r.code, report: JSON.parse(r.stdout()) };
  }

  describe(`retention on ${name}`, () => {
    it(
      'archive moves ended actors into an archive replay --file reads; tombstones stay; ' +
        'verify passes across the holes; later runs join them and take the tail',
      async () => {
        const { log, actors, appendNew } = await built(24, 3);
        const truth = await answers(log);
        const before = cutoffAfter(actors, 14);
        const archived = actors.filter((a) => !a.live && a.endedAt < before);
        expect(archived).toHaveLength(14);
        const out = join(log.home, 'first.jsonl.gz');
        expect(await archive(log, before, out)).toMatchObject({ file: out, actors: 14 });
        await log.read(async (s) => {
          for (const a of actors) {
            const row = (await s.getActor(a.id))!;
            const gone = archived.includes(a);
            expect(await s.streamVersion(row.stream), a.id).toBe(gone ? 0 : truth.get(a.id)!.version);
            expect(row.archived, a.id).toEqual(gone ? { file: out, at: expect.any(String) } : undefined);
          }
        });
        for (const a of actors) {
          const gone = archived.includes(a);
          expect(await inspect(log, a.id), a.id).toMatchObject(
            gone
              ? { state: truth.get(a.id)!.state, archived: { file: out } }
              : { state: truth.get(a.id)!.state, context: truth.get(a.id)!.context },
          );
        }
        const ps = JSON.parse((await runCli(['ps', '--all', ...log.where, '--json'])).stdout()) as {
          id: string;
          archived: { file: string } | null;
        }[];
        expect(
          ps
            .filter((x) => x.archived?.file === out)
            .map((x) => x.id)
            .sort(),
        ).toEqual(archived.map((a) => a.id).sort());
        for (const a of archived.filter((_, i) => i % 3 === 0)) {
          const rep = await runCli(['replay', '--file', out, a.id, '--json']);
          expect(rep.code, rep.stderr()).toBe(0);
          const view = JSON.parse(rep.stdout()) as { state: string; to: number; context: unknown };
          expect({ state: view.state, version: view.to, context: view.context }, a.id).toEqual(truth.get(a.id));
        }
        expect(await verify(log)).toMatchObject({ code: 0, report: { ok: true, archives: 1, findings: [] } });

        expect(await archive(log, cutoffAfter(actors, 19), join(log.home, 'second.jsonl.gz'))).toMatchObject({
          actors: 5,
        });
        const head = await log.read((s) => s.lastSeq());
        expect(await archive(log, '2030-01-01T00:00:00.000Z', join(log.home, 'third.jsonl.gz'))).toMatchObject({
          actors: 5,
          lastSeq: head,
        });
        expect(await verify(log)).toMatchObject({ code: 0, report: { ok: true, archives: 3, findings: [] } });
        // The tail went; a position is never given twice.
        expect(await appendNew('inst_after')).toBe(head + 1);
        expect(await verify(log)).toMatchObject({ code: 0, report: { ok: true, archives: 3, findings: [] } });
        expect(await archive(log, '2030-01-01T00:00:00.000Z', join(log.home, 'none.jsonl.gz'))).toMatchObject({
          file: null,
          actors: 0,
        });
      },
      180_000,
    );

    it('verify names a changed archive (ARCHIVE_DAMAGED) and a deleted snapshot (SNAPSHOT_MISSING)', async () => {
      const { log, actors } = await built(10, 2);
      const out = join(log.home, 'a.jsonl.gz');
      await archive(log, cutoffAfter(actors, 6), out);
      const original = readFileSync(out);
      const lines = gunzipSync(original).toString('utf8').trim().split('\n');
      const i = lines.findIndex((l) => l.startsWith('{"seq":') && l.includes('"version":2,'));
      const seq = (JSON.parse(lines[i]!) as { seq: number }).seq;
      lines[i] = lines[i]!.replace(/"at":"([^"]+)"/, '"at":"2020-01-01T00:00:00.000Z"');
      writeFileSync(out, gzipSync(`${lines.join('\n')}\n`));
      const damaged = await verify(log);
      expect(damaged.code).toBe(4);
      expect(damaged.report.findings).toEqual([
        expect.objectContaining({ code: 'ARCHIVE_DAMAGED', seq, severity: 'damage' }),
      ]);
      writeFileSync(out, original);
      expect(await verify(log)).toMatchObject({ code: 0, report: { ok: true, archives: 1, findings: [] } });

      const kept = actors.filter((a) => !a.live).at(-1)!;
      await log.deleteSnapshot(`${kept.kind}-${kept.id}`);
      const missing = await verify(log);
      expect(missing.code).toBe(4);
      expect(missing.report.findings).toEqual([
        expect.objectContaining({ code: 'SNAPSHOT_MISSING', stream: `${kept.kind}-${kept.id}` }),
      ]);
    }, 120_000);

    it('an archive moved away is a warning (ARCHIVE_NOT_FOUND); --archives <dir> finds it by name', async () => {
      const { log, actors } = await built(8, 1);
      const out = join(log.home, 'a.jsonl.gz');
      await archive(log, cutoffAfter(actors, 5), out);
      const moved = join(log.home, 'moved');
      mkdirSync(moved);
      renameSync(out, join(moved, 'a.jsonl.gz'));
      expect(await verify(log)).toMatchObject({
        code: 0,
        report: {
          ok: true,
          archives: 0,
          findings: [expect.objectContaining({ code: 'ARCHIVE_NOT_FOUND', severity: 'warning' })],
        },
      });
      expect(await verify(log, ['--archives', moved])).toMatchObject({
        code: 0,
        report: { ok: true, archives: 1, findings: [] },
      });
    }, 120_000);
  });
}
