// Bounded streams in the CLI: rows are printed as they are read and a slow reader slows the command (nothing
// piles up), `--follow` honours `--to` and ends when the actor has ended, and a reader that goes away
// (`| head -1`) ends every printing command quietly with status 0.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { main } from '../../../src/cli/main.ts';
import type { Io } from '../../../src/cli/output.ts';
import type { NewEvent } from '../../../src/domain/events.ts';
import type { AppendRequest } from '../../../src/store/sqlite/engine-types.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { instanceSpec } from '../../support/browser.ts';
import { cliArgs } from '../../support/cli.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const REPO = join(import.meta.dirname, '../../..');
const at = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();

/** An instance's life: requested … running, then `pauses` pause/resume pairs. */
function lifeOf(id: string, pauses: number): NewEvent[] {
  const events: NewEvent[] = [
    { type: 'instance.requested', data: { spec: instanceSpec({ instanceId: id }) }, at: at(0) },
    { type: 'instance.spawned', data: { pid: 7, host: '127.0.0.1', port: 41000 }, at: at(1) },
    { type: 'instance.healthy', data: { identity: 'match' }, at: at(2) },
    { type: 'instance.running', data: {}, at: at(3) },
  ];
  for (let i = 0; i < pauses; i++) {
    events.push(
      { type: 'instance.pause-requested', data: {}, at: at(4 + 2 * i) },
      { type: 'instance.resume-requested', data: {}, at: at(5 + 2 * i) },
    );
  }
  return events;
}

/** A log big enough that no printing command's output fits in a pipe's buffer. */
function bigLog(file: string): void {
  const store = new SqliteEventStore(file);
  const requests: AppendRequest[] = [];
  for (let i = 0; i < 1500; i++) {
    const id = `inst_${String(i).padStart(5, '0')}`;
    requests.push({
      stream: `instance-${id}`,
      events: lifeOf(id, 0),
      options: {
        expectedVersion: 'no-stream',
        projection: {
          id,
          kind: 'instance',
          stream: `instance-${id}`,
          state: 'running',
          status: 'active',
          version: 4,
          createdAt: at(i),
          updatedAt: at(i),
          summary: { appId: 'com.example.hello', sandbox: 'proot', port: 41000 + i },
        },
      },
    });
  }
  requests.push({
    stream: 'instance-inst_long',
    events: lifeOf('inst_long', 1500),
    options: { expectedVersion: 'no-stream' },
  });
  store.appendMany(requests);
  store.close();
}

/** An Io whose reader takes `n` lines, then stops reading until `release()`. */
function slowReader(n: number) {
  const out: string[] = [];
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const io: Io = {
    out: (t) => out.push(t),
    err: () => undefined,
    json: true,
    room: () => (out.length >= n ? released : undefined),
  };
  return { out, io, release };
}

const settle = (ms = 100) => new Promise((r) => setTimeout(r, ms));

/** Waits (up to 10 s) until `cond` holds. */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !cond(); i++) await settle(50);
  expect(cond()).toBe(true);
}

describe('events and replay stream what they read, paced by the reader', () => {
  let db: string;
  let dir: string;
  beforeAll(() => {
    dir = tempDir();
    db = join(dir, 'runlog.db');
    bigLog(db);
  });

  it('events --all prints the first rows before it has read the log, and waits while the reader is full', async () => {
    const r = slowReader(1);
    const done = main(['events', '--all', '--json', '--db', db], () => r.io);
    await until(() => r.out.length > 0);
    await settle(200);
    expect(r.out).toHaveLength(1); // printed as read, holding at the reader's pace: not 9,000 rows buffered
    expect(JSON.parse(r.out[0]!)).toMatchObject({ seq: 1, version: 1, type: 'instance.requested' });
    r.release();
    expect(await done).toBe(0);
    expect(r.out).toHaveLength(1500 * 4 + 4 + 3000);
    expect(r.out.map((l) => JSON.parse(l).seq)).toEqual(r.out.map((_, i) => i + 1));
  });

  it('replay --file checks the file whole, then prints steps as it folds them', async () => {
    const exported: string[] = [];
    expect(
      await main(['export', 'inst_long', '--db', db], () => ({
        out: (t) => exported.push(t),
        err: () => undefined,
        json: false,
      })),
    ).toBe(0);
    const file = join(dir, 'long.jsonl');
    writeFileSync(file, `${exported.join('\n')}\n`);
    const r = slowReader(2);
    const done = main(['replay', '--file', file, '--json'], () => r.io);
    await until(() => r.out.length > 0);
    await settle(200);
    expect(r.out).toHaveLength(2); // the document's opening and the first step
    r.release();
    expect(await done).toBe(0);
    const view = JSON.parse(r.out.join('\n'));
    expect(view).toMatchObject({ id: 'inst_long', kind: 'instance', version: 3004, to: 3004, state: 'running' });
    expect(view.steps).toHaveLength(3004);
    // The same answer as the in-memory replay from the log.
    const fromDb: string[] = [];
    expect(
      await main(['replay', 'inst_long', '--json', '--db', db], () => ({
        out: (t) => fromDb.push(t),
        err: () => undefined,
        json: true,
      })),
    ).toBe(0);
    expect(JSON.parse(fromDb.join('\n'))).toEqual(view);
  });
});

describe('events --follow', () => {
  let home: string;
  let db: string;
  beforeAll(async () => {
    home = tempDir();
    db = join(home, 'runlog.db');
    const rl = await createRunlog({ home, supervise: false, readOnly: false });
    await runlogInternals(rl).host.create('instance', 'inst_live', {
      type: 'instance.requested',
      data: { spec: instanceSpec({ instanceId: 'inst_live' }) },
    });
    await rl.send('instance', 'inst_live', {
      type: 'instance.spawned',
      data: { pid: 7, host: '127.0.0.1', port: 41000 },
    });
    await runlogInternals(rl).host.create('instance', 'inst_done', {
      type: 'instance.requested',
      data: { spec: instanceSpec({ instanceId: 'inst_done' }) },
    });
    await rl.send('instance', 'inst_done', { type: 'instance.stop-requested', data: {} });
    await rl.send('instance', 'inst_done', { type: 'instance.exited', data: { exitCode: 0 } });
    await rl.close();
  });

  /** Runs `runlog events …` in this process; lines as parsed JSON. */
  function follow(args: string[]) {
    const out: string[] = [];
    const done = main(['events', ...args, '--json', '--db', db], () => ({
      out: (t) => out.push(t),
      err: () => undefined,
      json: true,
    }));
    return {
      done,
      events: () => out.map((l) => JSON.parse(l) as { seq: number; stream: string; version: number; type: string }),
    };
  }

  /** Another process's writes, as a supervisor would make them. */
  async function write(fn: (rl: Awaited<ReturnType<typeof createRunlog>>) => Promise<void>): Promise<void> {
    const rl = await createRunlog({ home, supervise: false, readOnly: false });
    try {
      await fn(rl);
    } finally {
      await rl.close();
    }
  }

  it('of an actor that has ended prints its events and exits', async () => {
    const f = follow(['inst_done', '--follow']);
    expect(await f.done).toBe(0);
    expect(f.events().map((e) => e.type)).toEqual(['instance.requested', 'instance.stop-requested', 'instance.exited']);
  });

  it('ends at --to, printing nothing past it (also when --to is beyond what was written yet)', async () => {
    const f = follow(['inst_live', '--follow', '--to', '3']);
    await until(() => f.events().length >= 2);
    expect(f.events().map((e) => e.version)).toEqual([1, 2]);
    await write(async (rl) => {
      await rl.send('instance', 'inst_live', { type: 'instance.healthy', data: { identity: 'match' } });
      await rl.send('instance', 'inst_live', { type: 'instance.running', data: {} });
    });
    expect(await f.done).toBe(0);
    expect(f.events().map((e) => e.version)).toEqual([1, 2, 3]);
    // Already past --to: prints the range and exits at once.
    const g = follow(['inst_live', '--from', '2', '--to', '3', '--follow']);
    expect(await g.done).toBe(0);
    expect(g.events().map((e) => e.version)).toEqual([2, 3]);
  });

  it('of a live actor ends when the actor ends', async () => {
    const f = follow(['inst_live', '--follow']);
    await until(() => f.events().length >= 4);
    expect(f.events().map((e) => e.version)).toEqual([1, 2, 3, 4]);
    await write(async (rl) => {
      await rl.send('instance', 'inst_live', { type: 'instance.stop-requested', data: {} });
      await rl.send('instance', 'inst_live', { type: 'instance.exited', data: { exitCode: 0 } });
    });
    expect(await f.done).toBe(0);
    expect(
      f
        .events()
        .map((e) => e.type)
        .slice(-2),
    ).toEqual(['instance.stop-requested', 'instance.exited']);
  });

  it('--all --follow --to <seq> ends at that seq', async () => {
    const store = new SqliteEventStore(db);
    const last = store.lastSeq();
    store.close();
    const f = follow(['--all', '--from', String(last - 1), '--to', String(last + 1), '--follow']);
    await until(() => f.events().length >= 1);
    expect(f.events().map((e) => e.seq)).toEqual([last]);
    await write(async (rl) => {
      await runlogInternals(rl).host.create('instance', 'inst_more', {
        type: 'instance.requested',
        data: { spec: instanceSpec({ instanceId: 'inst_more' }) },
      });
      await rl.send('instance', 'inst_more', {
        type: 'instance.spawned',
        data: { pid: 8, host: '127.0.0.1', port: 41001 },
      });
    });
    expect(await f.done).toBe(0);
    expect(f.events().map((e) => e.seq)).toEqual([last, last + 1]);
  });
});

describe('a reader that goes away ends every printing command quietly (status 0, no error on stderr)', () => {
  let dir: string;
  let db: string;
  let history: string;
  beforeAll(() => {
    dir = tempDir();
    db = join(dir, 'runlog.db');
    bigLog(db);
    const r = spawnSync(process.execPath, cliArgs('export', 'inst_long', '--db', db), {
      cwd: REPO,
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    expect(r.status).toBe(0);
    history = join(dir, 'long.jsonl');
    writeFileSync(history, r.stdout);
  });
  afterAll(() => undefined);

  /** `runlog <args> | <reader>`: the CLI's exit status and its stderr. */
  function piped(args: string[], reader: string): { status: number; stderr: string } {
    const errFile = join(dir, `stderr-${Math.random().toString(36).slice(2)}`);
    const quoted = [process.execPath, ...cliArgs(...args)].map((a) => `'${a}'`).join(' ');
    const r = spawnSync(
      'bash',
      ['-c', `${quoted} 2>'${errFile}' | ${reader} >/dev/null; echo "\${PIPESTATUS[0]}"; cat '${errFile}' >&2`],
      { cwd: REPO, encoding: 'utf8' },
    );
    return { status: Number(r.stdout.trim()), stderr: r.stderr };
  }

  const big: string[][] = [
    ['ps'],
    ['ps', '--json'],
    ['events', '--all'],
    ['events', '--all', '--json'],
    ['events', 'inst_long'],
    ['export', 'inst_long'],
    ['replay', 'inst_long', '--step'],
    ['replay', '--file', '<history>', '--json'],
  ];
  for (const args of big) {
    it(`runlog ${args.join(' ')} | head -1`, () => {
      const r = piped(
        [...args.map((a) => (a === '<history>' ? history : a)), ...(args.includes('<history>') ? [] : ['--db', db])],
        'head -1',
      );
      // Notes a command writes on purpose (ps: "no supervisor has run on this log") may be there; no error is.
      expect(r.stderr).not.toMatch(/EPIPE|Error|\n\s+at |runlog: [A-Z_]+:/);
      expect(r.status).toBe(0);
    });
  }

  // Small outputs fit in the pipe; a reader that is gone before the first write makes them meet EPIPE too.
  const small: string[][] = [
    ['inspect', 'inst_long', '--db', '<db>'],
    ['--help'],
    ['ps', '--help'],
    ['--version'],
    ['rebuild', '--db', '<db>'],
  ];
  for (const args of small) {
    it(`runlog ${args.join(' ')} | (reader gone)`, () => {
      const r = piped(
        args.map((a) => (a === '<db>' ? db : a)),
        'true',
      );
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
    });
  }
});
