// Retention on PostgreSQL (postgres/archive.ts), against the real server (`npm run setup`), a schema per test. The specs
// SQLite meets too run on both in test/contract/retention/; here, what is PostgreSQL's: the tables a run leaves, a
// supervisor's copy following the log while its tail is archived, one archiver at a time (ARCHIVE_BUSY), another
// process appending throughout a run, an archiver stopped just before its removal holding up no append, the
// start-up tail check, and a kill -9 of the archiver at each step (as test/int/store/retention-kill.test.ts does on SQLite).
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { inspectActor } from '../../../src/inspect/inspection.ts';
import { archiveStoreUrl, startRetention } from '../../../src/supervisor/retention/retention.ts';
import type { ArchiveStep } from '../../../src/store/capabilities.ts';
import { ARCHIVE_LOCK_CLASS } from '../../../src/store/postgres/schema.ts';
import { PgHostStore } from '../../../src/store/postgres/host-store.ts';
import { collect } from '../../../src/store/port.ts';
import { runCli } from '../../support/cli-in-process.ts';
import { testSchema, usePostgres } from '../../support/postgres.ts';
import { writeRetentionLog, type BuiltActor } from '../../support/retention-log.ts';
import { tempDir } from '../../support/tmp.ts';

const db = usePostgres();

type Truth = Map<string, { state: string; version: number; context: unknown }>;

async function withStore<T>(store: string, fn: (s: PgHostStore) => T | Promise<T>): Promise<T> {
  const s = await PgHostStore.open({ url: store, pollMs: 0, maxConnections: 2 });
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}

const answers = (store: string): Promise<Truth> =>
  withStore(store, async (s) => {
    const truth: Truth = new Map();
    for (const r of await s.listActors({ all: true })) {
      const v = await inspectActor(s, r.id);
      truth.set(r.id, { state: v.state, version: v.version, context: v.context });
    }
    return truth;
  });

const cutoffAfter = (actors: BuiltActor[], n: number): string =>
  new Date(Date.parse(actors.filter((a) => !a.live)[n - 1]!.endedAt) + 30_000).toISOString();

async function archive(store: string, home: string, before: string, out: string) {
  const r = await runCli(['archive', '--store', store, '--before', before, '--out', out, '--json']);
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

async function verify(store: string, extra: string[] = []): Promise<{ code: number; report: any }> {
  const r = await runCli(['verify', '--store', store, '--json', ...extra]);
  return { code: r.code, report: JSON.parse(r.stdout()) };
}

async function newLog(
  ended: number,
  live: number,
): Promise<{ schema: string; store: string; home: string; actors: BuiltActor[] }> {
  const schema = testSchema('ret');
  const store = `${db.url}?schema=${schema}`;
  const home = tempDir();
  const actors = await writeRetentionLog(home, { ended, live, start: '2026-09-01T00:00:00.000Z', store });
  return { schema, store, home, actors };
}

describe('runlog archive on PostgreSQL', () => {
  it('moves ended actors to an archive that replay --file reads; tombstones stay; verify passes across the holes', async () => {
    const { schema, store, home, actors } = await newLog(30, 4);
    const truth = await answers(store);
    const before = cutoffAfter(actors, 20);
    const archived = actors.filter((a) => !a.live && a.endedAt < before);
    expect(archived).toHaveLength(20);

    const out = join(home, 'first.jsonl.gz');
    const r = await archive(store, home, before, out);
    expect(r).toMatchObject({ file: out, actors: 20, vacuum: 'plain' });
    const { rows: left } = await db.admin.query(
      `SELECT count(*)::integer AS n FROM ${schema}.events WHERE stream = ANY($1::text[])`,
      [archived.map((a) => `${a.kind}-${a.id}`)],
    );
    expect(left).toEqual([{ n: 0 }]);
    expect((await db.admin.query(`SELECT count(*)::integer AS n FROM ${schema}.tombstones`)).rows).toEqual([{ n: 20 }]);
    expect((await db.admin.query(`SELECT count(*)::integer AS n FROM ${schema}.chain_gaps`)).rows[0].n).toBeGreaterThan(
      0,
    );

    // A fresh copy of the log (what a supervisor starting now reads): archived actors listed with where they went.
    await withStore(store, async (s) => {
      for (const a of actors) {
        const row = (await s.getActor(a.id))!;
        const gone = archived.includes(a);
        expect(await s.streamVersion(row.stream), a.id).toBe(gone ? 0 : truth.get(a.id)!.version);
        expect(row.archived, a.id).toEqual(gone ? { file: out, at: expect.any(String) } : undefined);
        if (!gone)
          expect(await inspectActor(s, a.id)).toMatchObject({
            state: truth.get(a.id)!.state,
            context: truth.get(a.id)!.context,
          });
      }
    });
    const ps = await runCli(['ps', '--all', '--store', store, '--json']);
    expect(
      (JSON.parse(ps.stdout()) as { id: string; archived: { file: string } | null }[])
        .filter((x) => x.archived?.file === out)
        .map((x) => x.id)
        .sort(),
    ).toEqual(archived.map((a) => a.id).sort());

    // replay --file reproduces each archived actor from the archive (data as PostgreSQL's jsonb text).
    for (const a of archived.filter((_, i) => i % 4 === 0)) {
      const rep = await runCli(['replay', '--file', out, a.id, '--json']);
      expect(rep.code, rep.stderr()).toBe(0);
      const view = JSON.parse(rep.stdout()) as { state: string; to: number; context: unknown };
      expect({ state: view.state, version: view.to, context: view.context }, a.id).toEqual(truth.get(a.id));
    }
    expect(await verify(store)).toMatchObject({ code: 0, report: { ok: true, archives: 1, findings: [] } });

    // A second run with a later cutoff (its holes join the first's), then everything that ended: still sound.
    expect(await archive(store, home, cutoffAfter(actors, 25), join(home, 'second.jsonl.gz'))).toMatchObject({
      actors: 5,
    });
    // A reader following the log by position (a supervisor's copy) across a run that archives the log's tail.
    const follower = await PgHostStore.open({ url: store, pollMs: 50, maxConnections: 2 });
    try {
      const headBefore = await follower.lastSeq();
      const third = await archive(store, home, '2030-01-01T00:00:00.000Z', join(home, 'third.jsonl.gz'));
      expect(third).toMatchObject({ actors: 5, lastSeq: headBefore }); // the tail went
      expect(await verify(store)).toMatchObject({ code: 0, report: { ok: true, archives: 3, findings: [] } });
      // A fresh copy after the tail went appends above it (a position is never given twice) and the follower sees it.
      await withStore(store, async (s) => {
        expect(await s.lastSeq()).toBeLessThan(headBefore);
        const r = await s.appendToStream(
          'instance-inst_after',
          [{ type: 'instance.requested', data: { spec: { instanceId: 'inst_after' } } } as never],
          { expectedVersion: 'no-stream' },
        );
        expect(r.events[0]!.seq).toBe(headBefore + 1);
        expect((await collect(s.readStream('instance-inst_after'))).map((e) => e.seq)).toEqual([headBefore + 1]);
        // The tail check a supervisor makes at start passes across the holes.
        expect(await s.verifyChain({ afterSeq: (await s.lastSeq()) - 3 })).toMatchObject({
          ok: true,
          lastSeq: headBefore + 1,
        });
      });
      for (let i = 0; i < 100 && (await follower.lastSeq()) < headBefore + 1; i++)
        await new Promise((r) => setTimeout(r, 50));
      expect((await collect(follower.readAll({ from: headBefore + 1 }))).map((e) => e.stream)).toEqual([
        'instance-inst_after',
      ]);
    } finally {
      await follower.close();
    }
    // Nothing left to archive: no file.
    expect(await archive(store, home, '2030-01-01T00:00:00.000Z', join(home, 'none.jsonl.gz'))).toMatchObject({
      file: null,
      actors: 0,
    });
    expect(existsSync(join(home, 'none.jsonl.gz'))).toBe(false);
  }, 180_000);

  it('one archiver at a time: a second one gets ARCHIVE_BUSY and changes nothing', async () => {
    const { schema, store, home, actors } = await newLog(6, 1);
    await db.admin.query('SELECT pg_advisory_lock($1, hashtext($2))', [ARCHIVE_LOCK_CLASS, schema]);
    try {
      const r = await runCli([
        'archive',
        '--store',
        store,
        '--before',
        cutoffAfter(actors, 6),
        '--out',
        join(home, 'busy.jsonl.gz'),
        '--json',
      ]);
      expect(r.code, r.stderr()).toBe(5); // a conflict
      expect(r.stderr()).toContain('ARCHIVE_BUSY');
      expect(existsSync(join(home, 'busy.jsonl.gz'))).toBe(false);
      expect((await db.admin.query(`SELECT count(*)::integer AS n FROM ${schema}.tombstones`)).rows).toEqual([
        { n: 0 },
      ]);
    } finally {
      await db.admin.query('SELECT pg_advisory_unlock($1, hashtext($2))', [ARCHIVE_LOCK_CLASS, schema]);
    }
    expect(await archive(store, home, cutoffAfter(actors, 6), join(home, 'free.jsonl.gz'))).toMatchObject({
      actors: 6,
    });
  }, 120_000);

  it(
    "a store's own archive run (the Archiving capability) " +
      'lists what it archived with where the events went, without reopening',
    async () => {
      const { store, home, actors } = await newLog(6, 1);
      const before = cutoffAfter(actors, 4);
      const archived = actors.filter((a) => !a.live && a.endedAt < before);
      expect(archived).toHaveLength(4);
      const out = join(home, 'own.jsonl.gz');
      await withStore(store, async (s) => {
        expect(await s.archiveEnded({ before, out })).toMatchObject({ file: out, actors: 4, vacuum: 'plain' });
        for (const a of actors)
          expect((await s.getActor(a.id))?.archived, a.id).toEqual(
            archived.includes(a) ? { file: out, at: expect.any(String) } : undefined,
          );
      });
      expect(await verify(store)).toMatchObject({ code: 0, report: { ok: true, archives: 1, findings: [] } });
    },
    120_000,
  );

  it("serve --retain's schedule on PostgreSQL: skips a run while another node archives, archives once it is free", async () => {
    const { schema, store, home } = await newLog(6, 1);
    const pgStore = await PgHostStore.open({ url: store, pollMs: 0, maxConnections: 2 });
    const said: string[] = [];
    const heard = async (re: RegExp): Promise<void> => {
      for (let i = 0; i < 200 && !said.some((m) => re.test(m)); i++) await new Promise((r) => setTimeout(r, 50));
      expect(said).toContainEqual(expect.stringMatching(re));
    };
    try {
      await db.admin.query('SELECT pg_advisory_lock($1, hashtext($2))', [ARCHIVE_LOCK_CLASS, schema]);
      let stop: () => void;
      try {
        stop = startRetention(pgStore, home, { retainMs: 86_400_000 }, (m) => said.push(m));
        await heard(/another node is archiving this log/);
        stop();
      } finally {
        await db.admin.query('SELECT pg_advisory_unlock($1, hashtext($2))', [ARCHIVE_LOCK_CLASS, schema]);
      }
      expect((await db.admin.query(`SELECT count(*)::integer AS n FROM ${schema}.tombstones`)).rows).toEqual([
        { n: 0 },
      ]);
      stop = startRetention(pgStore, home, { retainMs: 86_400_000 }, (m) => said.push(m));
      await heard(/^retention: archived 6 actors/);
      stop();
    } finally {
      await pgStore.close();
    }
    expect(await verify(store)).toMatchObject({ code: 0, report: { ok: true, archives: 1, findings: [] } });
  }, 120_000);

  it('another process appends all through a run: nothing it appended is lost, and verify (chain and archive) passes', async () => {
    const { schema, store, home, actors } = await newLog(20, 2);
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, '../../support/pg-appender.ts'), store, tempDir(), 'inst_side'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const count = async (): Promise<number> =>
      (
        await db.admin.query(
          `SELECT count(*)::integer AS n FROM ${schema}.events WHERE stream LIKE 'instance-inst_side%'`,
        )
      ).rows[0].n as number;
    const grown = async (n: number): Promise<void> => {
      const from = await count();
      for (let i = 0; i < 600 && (await count()) < from + n; i++) await new Promise((r) => setTimeout(r, 50));
      expect(await count(), `the appender wrote nothing meanwhile: ${err}`).toBeGreaterThanOrEqual(from + n);
    };
    try {
      await grown(3);
      // At each step the other process gets to append (between the plan and the removal too).
      const r = await archiveStoreUrl(store, {
        before: cutoffAfter(actors, 20),
        home,
        out: join(home, 'busy-log.jsonl.gz'),
        onStep: (s) => (s === 'removing' ? undefined : grown(6)),
      });
      expect(r.actors).toBe(20);
      await grown(6);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, err).toBe(0);
    const created = Number(out.trim());
    expect(created).toBeGreaterThan(0);
    // Every instance it created is there with its 3 events (none was ended before the cutoff: none archived).
    expect(await count()).toBe(created * 3);
    // (The appender's snapshots are SNAPSHOT_STALE warnings here: a tsx child fingerprints the machines' code as
    // tsx compiled it, vitest's as vite did. No damage of any kind.)
    const after = await verify(store);
    expect(after).toMatchObject({ code: 0, report: { ok: true, archives: 1 } });
    expect(
      (after.report.findings as { code: string; severity: string }[]).filter((f) => f.code !== 'SNAPSHOT_STALE'),
    ).toEqual([]);
    // Positions only grew: the events after the run sit above everything the archive held.
    const { rows } = await db.admin.query(
      `SELECT min(seq)::integer AS s FROM ${schema}.events WHERE stream LIKE 'instance-inst_side%' AND seq > ` +
        `(SELECT last_seq FROM ${schema}.archives)`,
    );
    expect(rows[0].s).not.toBeNull();
  }, 180_000);
});

describe('an archiver stopped between two statements', () => {
  it('holds up no append: its removal takes the append lock inside one statement, so a stop before it leaves appends free', async () => {
    const { schema, store, home, actors } = await newLog(6, 1);
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(import.meta.dirname, '../../support/pg-archive-child.ts'),
        store,
        home,
        cutoffAfter(actors, 6),
        join(home, 'a.jsonl.gz'),
        'removing',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let err = '';
    const atRemoving = new Promise<void>((resolve, reject) => {
      child.stderr.on('data', (b: Buffer) => {
        err += b.toString();
        if (err.includes('at removing\n')) resolve();
      });
      child.on('exit', () => reject(new Error(`the archive child ended before its removal: ${err}`)));
    });
    // An appender that waits at most 3 s for the append lock (the archiver's session would hold it for 10 s, its
    // idle_in_transaction_session_timeout, were it held across statements).
    const appender = new pg.Client({
      connectionString: db.url,
      options: `-c search_path=${schema} -c lock_timeout=3000`,
    });
    await appender.connect();
    try {
      await atRemoving; // the archiver stands still there (a stop between two statements of its run)
      const { rows } = await appender.query(
        "SELECT o_ok FROM append_event('instance-while-archiving', 'no-stream', " +
          "'instance.requested', 1, '{}', '{}', '2026-09-02T00:00:00.000Z')",
      );
      expect(rows).toEqual([{ o_ok: true }]);
    } finally {
      child.kill('SIGKILL');
      await appender.end();
    }
  }, 120_000);
});

describe('a PostgreSQL supervisor at start', () => {
  it("checks the chain's tail before anything is read or appended: a changed event is STORE_CHAIN_BROKEN", async () => {
    const { schema, store, actors } = await newLog(3, 1);
    const { rows } = await db.admin.query(`SELECT max(seq)::integer AS s FROM ${schema}.events`);
    await db.admin.query(`UPDATE ${schema}.events SET at = '2020-01-01T00:00:00.000Z' WHERE seq = $1`, [rows[0].s - 2]);
    const { createRunlog } = await import('../../../src/supervisor/runlog.ts');
    await expect(
      createRunlog({ home: tempDir(), store, node: 'n1', supervise: true, readOnly: false }),
    ).rejects.toMatchObject({ code: 'STORE_CHAIN_BROKEN', details: expect.objectContaining({ seq: rows[0].s - 2 }) });
    expect(actors).toHaveLength(4);
  }, 120_000);
});

const STEPS = (
  [
    { step: 'planned', archived: false },
    { step: 'file-linked', archived: false },
    { step: 'removing', archived: false }, // the removal (one statement, its own transaction) not yet sent
    { step: 'committed', archived: true },
  ] as { step: ArchiveStep; archived: boolean }[]
).map((s) => ({ ...s, outcome: s.archived ? 'fully archived' : 'untouched' }));

function runUntil(store: string, home: string, before: string, out: string, step: ArchiveStep): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(import.meta.dirname, '../../support/pg-archive-child.ts'),
        store,
        home,
        before,
        out,
        step,
      ],
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

describe('archive on PostgreSQL under SIGKILL', () => {
  it.each(STEPS)(
    'killed at $step: the log is $outcome for every actor, verifies, and a re-run completes',
    async ({ step, archived }) => {
      const { schema, store, home, actors } = await newLog(10, 2);
      const truth = await answers(store);
      const before = cutoffAfter(actors, 6);
      const candidates = actors.filter((a) => !a.live && a.endedAt < before);
      expect(candidates).toHaveLength(6);
      const out = join(home, 'archive.jsonl.gz');
      await runUntil(store, home, before, out, step);

      // The killed session's transaction and locks are gone with it: the log is whole, and a supervisor's copy agrees.
      expect(await verify(store)).toMatchObject({ code: 0, report: { ok: true, findings: [] } });
      await withStore(store, async (s) => {
        for (const a of actors) {
          const row = (await s.getActor(a.id))!;
          const gone = archived && candidates.includes(a);
          expect(await s.streamVersion(row.stream), `${a.id} after a kill at ${step}`).toBe(
            gone ? 0 : truth.get(a.id)!.version,
          );
          expect(Boolean(row.archived), `${a.id}: tombstone after a kill at ${step}`).toBe(gone);
        }
      });
      if (!archived)
        expect((await db.admin.query(`SELECT count(*)::integer AS n FROM ${schema}.archives`)).rows).toEqual([
          { n: 0 },
        ]);
      expect(readdirSync(home).filter((f) => f.includes('.partial-')).length).toBeLessThanOrEqual(1);

      // A later run (the archive lock was let go with the killed session) finishes or has nothing left to do.
      const again = await archiveStoreUrl(store, { before, home, out: join(home, 'again.jsonl.gz') });
      expect(again.actors).toBe(archived ? 0 : 6);
      expect(await verify(store)).toMatchObject({ code: 0, report: { ok: true, findings: [] } });
    },
    120_000,
  );
});
