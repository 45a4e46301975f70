// Retention (issue 15): `runlog archive` moves the events of actors that ended before a time into a gzip archive
// in `runlog export`'s format, leaves tombstones, keeps the chain checkable across the holes it leaves, and gives
// the space back. (A kill at each step: test/int/store/retention-kill.test.ts.)
import Database from 'better-sqlite3';
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { inspectActor } from '../../../src/inspect/inspection.ts';
import { parseBefore, startRetention } from '../../../src/supervisor/retention/retention.ts';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { verifyLog } from '../../../src/inspect/verify-log.ts';
import { eventHash } from '../../../src/store/chain.ts';
import { collect } from '../../../src/store/port.ts';
import { RunlogError } from '../../../src/domain/errors.ts';
import type { Archiving } from '../../../src/store/capabilities.ts';
import { SqlitePortStore } from '../../../src/store/sqlite/port-adapter.ts';
import { runCli } from '../../support/cli-in-process.ts';
import { writeRetentionLog, type BuiltActor } from '../../support/retention-log.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

/** Every actor's answer (inspect) before anything is archived. */
async function answers(db: string): Promise<Map<string, { state: string; version: number; context: unknown }>> {
  const s = new SqlitePortStore(db, { readOnly: true });
  try {
    const truth = new Map<string, { state: string; version: number; context: unknown }>();
    for (const r of await s.listActors({ all: true })) {
      const v = await inspectActor(s, r.id);
      truth.set(r.id, { state: v.state, version: v.version, context: v.context });
    }
    return truth;
  } finally {
    await s.close();
  }
}

const cutoffAfter = (actors: BuiltActor[], n: number): string =>
  new Date(Date.parse(actors.filter((a) => !a.live)[n - 1]!.endedAt) + 30_000).toISOString();

async function archive(home: string, before: string, out: string) {
  const r = await runCli(['archive', '--home', home, '--before', before, '--out', out, '--json']);
  expect(r.code, r.stderr()).toBe(0);
  return JSON.parse(r.stdout()) as {
    file: string;
    actors: number;
    events: number;
    lastSeq: number;
    lastHash: string;
    sizeBefore: number;
    sizeAfter: number;
    vacuum: string;
  };
}

describe('runlog archive', () => {
  it('moves ended actors to an archive that replay --file reads; tombstones stay; verify passes; space comes back', async () => {
    const home = tempDir();
    const actors = await writeRetentionLog(home, { ended: 60, live: 6, start: '2026-09-01T00:00:00.000Z' });
    const db = join(home, 'runlog.db');
    const truth = await answers(db);
    const before = cutoffAfter(actors, 40);
    const archived = actors.filter((a) => !a.live && a.endedAt < before);
    expect(archived).toHaveLength(40);

    const out = join(home, 'first.jsonl.gz');
    const r = await archive(home, before, out);
    expect(r).toMatchObject({ file: out, actors: 40 });
    expect(r.sizeAfter).toBeLessThan(r.sizeBefore);
    expect(statSync(out).mode & 0o777).toBe(0o600);

    // The log: archived actors have no events and a tombstone; live and later ones are untouched.
    const store = new SqlitePortStore(db, { readOnly: true });
    for (const a of actors) {
      const row = (await store.getActor(a.id))!;
      expect(row, a.id).toBeDefined();
      const gone = archived.includes(a);
      expect(await store.streamVersion(row.stream), a.id).toBe(gone ? 0 : truth.get(a.id)!.version);
      expect(row.archived, a.id).toEqual(gone ? { file: out, at: expect.any(String) } : undefined);
      if (!gone)
        expect(await inspectActor(store, a.id)).toMatchObject({
          state: truth.get(a.id)!.state,
          context: truth.get(a.id)!.context,
        });
    }
    expect(await inspectActor(store, archived[0]!.id)).toMatchObject({
      state: truth.get(archived[0]!.id)!.state,
      archived: { file: out },
    });
    await store.close();
    expect(await verifyLog(db)).toMatchObject({ ok: true, findings: [] });

    // ps --all lists them and says where they went.
    const ps = await runCli(['ps', '--all', '--home', home, '--json']);
    const rows = JSON.parse(ps.stdout()) as { id: string; archived: { file: string } | null }[];
    expect(
      rows
        .filter((x) => x.archived?.file === out)
        .map((x) => x.id)
        .sort(),
    ).toEqual(archived.map((a) => a.id).sort());
    expect((await runCli(['inspect', archived[3]!.id, '--home', home])).stdout()).toContain(
      `runlog replay --file ${out} ${archived[3]!.id}`,
    );

    // replay --file <archive> <id> reproduces each archived actor's state and context.
    for (const a of archived) {
      const rep = await runCli(['replay', '--file', out, a.id, '--json']);
      expect(rep.code, rep.stderr()).toBe(0);
      const view = JSON.parse(rep.stdout()) as { state: string; to: number; context: unknown };
      expect({ state: view.state, version: view.to, context: view.context }, a.id).toEqual(truth.get(a.id));
    }
    const noId = await runCli(['replay', '--file', out]);
    expect(noId.code).toBe(2);
    expect(noId.stderr()).toContain('name the actor');
    expect((await runCli(['replay', '--file', out, 'exec_nobody'])).code).toBe(1);

    // rebuild keeps the tombstoned actors' rows.
    expect((await runCli(['rebuild', '--home', home])).code).toBe(0);
    expect(JSON.parse((await runCli(['ps', '--all', '--home', home, '--json'])).stdout())).toHaveLength(actors.length);
    expect((await verifyLog(db)).ok).toBe(true);
  });

  it('the archive carries its chain: every event line hashes to its link, and the trailer names the last one', async () => {
    const home = tempDir();
    const actors = await writeRetentionLog(home, { ended: 12, live: 3, start: '2026-09-01T00:00:00.000Z' });
    const out = join(home, 'a.jsonl.gz');
    const r = await archive(home, cutoffAfter(actors, 8), out);
    const lines = gunzipSync(readFileSync(out)).toString('utf8').trim().split('\n');
    expect(JSON.parse(lines[0]!)).toMatchObject({ runlog: 'archive', format: 1, actors: 8 });
    const trailer = JSON.parse(lines.at(-1)!);
    expect(trailer).toMatchObject({
      runlog: 'archive-end',
      actors: 8,
      events: r.events,
      lastSeq: r.lastSeq,
      lastHash: r.lastHash,
    });
    const hashes = new Map<number, string>();
    const events = lines
      .filter((l) => l.startsWith('{"seq":'))
      .map(
        (l) =>
          JSON.parse(l) as {
            seq: number;
            stream: string;
            version: number;
            type: string;
            schema: number;
            at: string;
            data: unknown;
            meta: unknown;
            hash: string;
            prev?: string;
          },
      );
    expect(events).toHaveLength(r.events);
    for (const e of events) hashes.set(e.seq, e.hash);
    for (const e of events) {
      const prev = e.prev ?? hashes.get(e.seq - 1);
      expect(prev, `seq ${e.seq}: its previous link is in the archive or on its line`).toBeDefined();
      expect(
        eventHash(
          Buffer.from(prev!, 'hex'),
          e.seq,
          e.stream,
          e.version,
          e.type,
          e.schema,
          e.at,
          JSON.stringify(e.data),
          JSON.stringify(e.meta),
        ).toString('hex'),
      ).toBe(e.hash);
    }
    // The log recorded the archive and the link it ends on.
    const raw = new Database(join(home, 'runlog.db'), { readonly: true });
    expect(raw.prepare('SELECT file, actors, events, sha256, last_seq FROM archives').all()).toEqual([
      { file: out, actors: 8, events: r.events, sha256: expect.stringMatching(/^[0-9a-f]{64}$/), last_seq: r.lastSeq },
    ]);
    raw.close();
  });

  describe('verify reads the archives', () => {
    async function archived() {
      const home = tempDir();
      const actors = await writeRetentionLog(home, { ended: 12, live: 3, start: '2026-09-01T00:00:00.000Z' });
      const first = join(home, 'a.jsonl.gz');
      await archive(home, cutoffAfter(actors, 5), first);
      const second = join(home, 'b.jsonl.gz');
      const r = await archive(home, cutoffAfter(actors, 9), second);
      return { home, db: join(home, 'runlog.db'), first, second, r };
    }
    const rewrite = (file: string, edit: (lines: string[]) => string[]): void => {
      const lines = gunzipSync(readFileSync(file)).toString('utf8').trim().split('\n');
      writeFileSync(file, gzipSync(`${edit(lines).join('\n')}\n`));
    };

    it('each archive checks against its own chain and the log’s record of it', async () => {
      const { db } = await archived();
      expect(await verifyLog(db)).toMatchObject({ ok: true, archives: 2, findings: [] });
    });

    it('an event changed in an archive: ARCHIVE_DAMAGED naming its seq; the log itself is sound', async () => {
      const { db, second, home } = await archived();
      let seq = 0;
      rewrite(second, (lines) =>
        lines.map((l) => {
          if (seq !== 0 || !l.startsWith('{"seq":')) return l;
          const e = JSON.parse(l) as { seq: number; at: string };
          seq = e.seq;
          return l.replace(`"at":"${e.at}"`, `"at":"${e.at.replace(/^2026/, '2025')}"`);
        }),
      );
      const r = await verifyLog(db);
      expect(r.ok).toBe(false);
      expect(r.findings).toEqual([
        expect.objectContaining({
          code: 'ARCHIVE_DAMAGED',
          severity: 'damage',
          seq,
          message: expect.stringContaining(`does not match its hash`),
        }),
      ]);
      const c = await runCli(['verify', '--home', home]);
      expect(c.code).toBe(4);
      expect(c.stdout()).toContain(`DAMAGE ARCHIVE_DAMAGED: archive ${second}`);
    });

    it(
      'an archive whose events were changed and chained again (a valid chain of its own): ' +
        'ARCHIVE_DAMAGED, against the links the log recorded',
      async () => {
        const { db, second } = await archived();
        rewrite(second, (lines) => {
          const parsed = lines.map((l) => JSON.parse(l) as Record<string, any>);
          const events = parsed.filter((e) => typeof e.seq === 'number').sort((a, b) => a.seq - b.seq);
          events[0]!.at = events[0]!.at.replace(/^2026/, '2025');
          const hashes = new Map<number, string>();
          for (const e of events) {
            const prev = e.prev ?? hashes.get(e.seq - 1);
            e.hash = eventHash(
              Buffer.from(prev, 'hex'),
              e.seq,
              e.stream,
              e.version,
              e.type,
              e.schema,
              e.at,
              JSON.stringify(e.data),
              JSON.stringify(e.meta),
            ).toString('hex');
            hashes.set(e.seq, e.hash);
          }
          const trailer = parsed.at(-1)!;
          trailer.lastHash = hashes.get(trailer.lastSeq);
          return parsed.map((e) => JSON.stringify(e));
        });
        const r = await verifyLog(db);
        expect(r.ok).toBe(false);
        expect(r.findings).toEqual([
          expect.objectContaining({
            code: 'ARCHIVE_DAMAGED',
            message: expect.stringMatching(/recorded the hole|does not end on the link the log recorded/),
          }),
        ]);
      },
    );

    it('an archive cut short: ARCHIVE_DAMAGED', async () => {
      const { db, first, second } = await archived();
      const whole = readFileSync(first);
      writeFileSync(first, whole.subarray(0, Math.floor(whole.length / 2)));
      expect((await verifyLog(db)).findings).toEqual([
        expect.objectContaining({ code: 'ARCHIVE_DAMAGED', message: expect.stringContaining(first) }),
      ]);
      writeFileSync(first, whole);
      // The trailer dropped: the file is cut at a line boundary.
      rewrite(second, (lines) => lines.slice(0, -1));
      expect((await verifyLog(db)).findings).toEqual([
        expect.objectContaining({ code: 'ARCHIVE_DAMAGED', message: expect.stringContaining('no trailer') }),
      ]);
    });

    it('an archive moved away is named, not checked (a warning); --archives says where it went', async () => {
      const { db, home, first } = await archived();
      const moved = join(home, 'elsewhere');
      mkdirSync(moved);
      renameSync(first, join(moved, 'a.jsonl.gz'));
      expect(await verifyLog(db)).toMatchObject({
        ok: true,
        archives: 1,
        findings: [expect.objectContaining({ code: 'ARCHIVE_NOT_FOUND', severity: 'warning' })],
      });
      expect(await verifyLog(db, { archiveDirs: [moved] })).toMatchObject({ ok: true, archives: 2, findings: [] });
      const c = await runCli(['verify', '--home', home, '--archives', moved]);
      expect(c.code).toBe(0);
      expect(c.stdout()).toContain('2 archive(s)');
    });
  });

  it('archives again, the log tail too, and appends continue the chain after the archived head', async () => {
    const home = tempDir();
    const actors = await writeRetentionLog(home, { ended: 30, live: 4, start: '2026-09-01T00:00:00.000Z' });
    const db = join(home, 'runlog.db');
    const truth = await answers(db);
    await archive(home, cutoffAfter(actors, 10), join(home, '1.jsonl.gz'));
    await archive(home, cutoffAfter(actors, 20), join(home, '2.jsonl.gz'));
    expect(await verifyLog(db)).toMatchObject({ ok: true, findings: [] });
    // Everything ended: the log's last events (the last ended actor's) are archived too.
    const r3 = await archive(home, '2030-01-01T00:00:00.000Z', join(home, '3.jsonl.gz'));
    expect(r3.actors).toBe(10);
    const head = await verifyLog(db);
    expect(head).toMatchObject({ ok: true, findings: [] });
    expect(head.lastSeq).toBe(r3.lastSeq); // the head is the last archived link

    // A supervisor appends after the archived head: no seq is given twice, the chain goes on.
    const live = actors.find((a) => a.live)!;
    const rl = await createRunlog({ home, supervise: false, readOnly: false });
    await rl.send('instance', live.id, {
      type: 'instance.stop-requested',
      at: '2026-12-01T00:00:00.000Z',
      data: { graceMs: null },
    } as never);
    const last = (await collect(runlogInternals(rl).store.readStream(`instance-${live.id}`))).at(-1)!;
    await rl.close();
    expect(last.seq).toBe(r3.lastSeq + 1);
    expect(await verifyLog(db)).toMatchObject({ ok: true, findings: [] });
    for (const n of ['1', '2', '3']) {
      const a = actors.filter((x) => !x.live)[n === '1' ? 0 : n === '2' ? 15 : 29]!;
      const rep = JSON.parse(
        (await runCli(['replay', '--file', join(home, `${n}.jsonl.gz`), a.id, '--json'])).stdout(),
      ) as { state: string; context: unknown };
      expect({ state: rep.state, context: rep.context }).toEqual({
        state: truth.get(a.id)!.state,
        context: truth.get(a.id)!.context,
      });
    }
  });

  it('never archives a live actor, and with nothing ended before the time writes nothing', async () => {
    const home = tempDir();
    const actors = await writeRetentionLog(home, { ended: 4, live: 4, start: '2026-09-01T00:00:00.000Z' });
    const none = await runCli(['archive', '--home', home, '--before', '2026-08-01', '--json']);
    expect(JSON.parse(none.stdout())).toMatchObject({ file: null, actors: 0 });
    const all = await archive(home, '2030-01-01T00:00:00.000Z', join(home, 'x.jsonl.gz'));
    expect(all.actors).toBe(4);
    const store = new SqlitePortStore(join(home, 'runlog.db'), { readOnly: true });
    for (const a of actors.filter((x) => x.live))
      expect(await store.streamVersion(`instance-${a.id}`), a.id).toBeGreaterThan(0);
    await store.close();
  });

  it('a hole no archive recorded is damage: STORE_CHAIN_BROKEN names where', async () => {
    const home = tempDir();
    const actors = await writeRetentionLog(home, { ended: 12, live: 3, start: '2026-09-01T00:00:00.000Z' });
    const db = join(home, 'runlog.db');
    await archive(home, cutoffAfter(actors, 6), join(home, 'a.jsonl.gz'));
    const raw = new Database(db);
    const gap = raw
      .prepare('SELECT seq, from_seq AS "from" FROM chain_gaps WHERE from_seq > 1 ORDER BY seq LIMIT 1')
      .get() as { seq: number; from: number };
    // An event deleted just before a recorded hole: the hole no longer covers what is missing.
    const victim = (raw.prepare('SELECT max(seq) AS s FROM events WHERE seq < ?').get(gap.from) as { s: number }).s;
    expect(victim).toBeGreaterThan(0);
    raw.prepare('DELETE FROM events WHERE seq = ?').run(victim);
    raw.close();
    const report = await verifyLog(db);
    expect(report.ok).toBe(false);
    expect(report.findings).toContainEqual(
      expect.objectContaining({ code: 'STORE_CHAIN_BROKEN', message: expect.stringContaining('missing') }),
    );
  });

  it('an archive is never overwritten', async () => {
    const home = tempDir();
    const actors = await writeRetentionLog(home, { ended: 6, live: 1, start: '2026-09-01T00:00:00.000Z' });
    const out = join(home, 'a.jsonl.gz');
    await archive(home, cutoffAfter(actors, 2), out);
    const bytes = readFileSync(out);
    const again = await runCli(['archive', '--home', home, '--before', '2030-01-01', '--out', out, '--json']);
    expect(again.code).toBe(2);
    expect(again.stderr()).toContain('ARCHIVE_EXISTS');
    expect(readFileSync(out).equals(bytes)).toBe(true);
    expect((await verifyLog(join(home, 'runlog.db'))).ok).toBe(true);
  });

  it('a log made before auto_vacuum gets it from its first archive (one VACUUM), then incremental', async () => {
    const home = tempDir();
    const actors = await writeRetentionLog(home, { ended: 20, live: 2, start: '2026-09-01T00:00:00.000Z' });
    const db = join(home, 'runlog.db');
    const raw = new Database(db);
    raw.pragma('auto_vacuum = NONE');
    raw.exec('VACUUM');
    expect(raw.pragma('auto_vacuum', { simple: true })).toBe(0);
    raw.close();
    rmSync(`${db}-shutdown`); // the file was changed (shrunk) behind runlog's back: its last shutdown record no longer holds
    expect((await archive(home, cutoffAfter(actors, 10), join(home, '1.jsonl.gz'))).vacuum).toBe('full');
    expect((await archive(home, cutoffAfter(actors, 15), join(home, '2.jsonl.gz'))).vacuum).toBe('incremental');
    expect((await verifyLog(db)).ok).toBe(true);
  });

  it('the serve policy (--retain) archives what ended longer ago than its duration, at start and on schedule', async () => {
    const home = tempDir();
    const actors = await writeRetentionLog(home, { ended: 10, live: 2, start: '2026-09-01T00:00:00.000Z' });
    const db = join(home, 'runlog.db');
    const ended = actors.filter((a) => !a.live);
    // "Now" is 1 day (and 1 ms) after the 6th actor ended: a 1-day policy archives the first 6.
    const now = () => new Date(Date.parse(ended[5]!.endedAt) + 86_400_000 + 1).toISOString();
    const store = new SqlitePortStore(db);
    const said: string[] = [];
    const stop = startRetention(store, home, { retainMs: 86_400_000, everyMs: 60_000 }, (m) => said.push(m), now);
    await new Promise((r) => setTimeout(r, 50));
    stop();
    await store.close();
    expect(said).toEqual([
      expect.stringMatching(
        /^retention: archived 6 actors \(\d+ events\) that ended before .* to .*archives\/runlog-.*\.jsonl\.gz/,
      ),
    ]);
    const ro = new SqlitePortStore(db, { readOnly: true });
    const rows = await Promise.all(ended.map((a) => ro.getActor(a.id)));
    expect(rows.map((r) => Boolean(r!.archived))).toEqual([
      true,
      true,
      true,
      true,
      true,
      true,
      false,
      false,
      false,
      false,
    ]);
    await ro.close();
    expect((await verifyLog(db)).ok).toBe(true);
    // A run that fails is told and removes nothing; a run another node is doing (ARCHIVE_BUSY) is skipped.
    for (const [err, message] of [
      [new Error('disk full'), 'retention: archive run failed, nothing removed: disk full'],
      [
        new RunlogError('ARCHIVE_BUSY', 'another archiver holds the lock'),
        'retention: another node is archiving this log; this run is skipped',
      ],
    ] as const) {
      const failing: Archiving = { archiveEnded: () => Promise.reject(err) };
      const told: string[] = [];
      const halt = startRetention(failing, home, { retainMs: 1, everyMs: 60_000 }, (m) => told.push(m), now);
      await new Promise((r) => setTimeout(r, 50));
      halt();
      expect(told).toEqual([message]);
    }
    const serve = await runCli(['serve', '--home', home, '--retain', 'forever']);
    expect(serve.code).toBe(2);
    expect(serve.stderr()).toContain('--retain must be a duration');
  });

  it('--before takes a date or a duration back from now', () => {
    expect(parseBefore('30d', '2026-12-01T00:00:00.000Z')).toBe('2026-11-01T00:00:00.000Z');
    expect(parseBefore('12h', '2026-12-01T00:00:00.000Z')).toBe('2026-11-30T12:00:00.000Z');
    expect(parseBefore('2026-11-01', '2026-12-01T00:00:00.000Z')).toBe('2026-11-01T00:00:00.000Z');
    expect(() => parseBefore('last tuesday', '2026-12-01T00:00:00.000Z')).toThrow(/--before must be/);
  });
});
