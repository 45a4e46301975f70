// Replay debugging in the CLI: export → replay --file round trips, --step output, upcasters applied to
// file events, and histories this runlog cannot apply failing with the first event named.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diffContext } from '../../../src/cli/context-diff.ts';
import { parseHistory } from '../../../src/inspect/history-file.ts';
import { replayHistory } from '../../../src/cli/replay-stepper.ts';
import { UpcasterRegistry } from '../../../src/store/upcasters.ts';
import { seededRunlog } from '../../support/browser.ts';
import { runCli } from '../../support/cli-in-process.ts';

let dir: string;
let db: string;
let executionId: string;
/** Histories exported from the database, by actor id. */
const exported = new Map<string, string>();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'runlog-debug-'));
  const seeded = await seededRunlog(dir);
  executionId = seeded.executionId;
  db = seeded.rl.dbPath;
  await seeded.rl.close();
  for (const id of ['inst_web', 'inst_old', executionId, seeded.failedExecutionId]) {
    const r = await runCli(['export', id, '--db', db]);
    expect(r.code).toBe(0);
    exported.set(id, `${r.out.join('\n')}\n`);
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Writes a history (optionally edited line by line) and returns its path. */
function historyFile(id: string, edit?: (lines: any[]) => void): string {
  const lines = exported
    .get(id)!
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  edit?.(lines);
  const file = join(dir, `${id}-${Math.random().toString(36).slice(2)}.jsonl`);
  writeFileSync(file, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
  return file;
}

describe('runlog export', () => {
  it('writes a header line, then one recorded event per line', () => {
    const lines = exported
      .get('inst_web')!
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({
      runlog: 'history',
      format: 1,
      kind: 'instance',
      id: 'inst_web',
      stream: 'instance-inst_web',
      version: 11,
    });
    expect(Date.parse(lines[0].exportedAt)).not.toBeNaN();
    expect(lines).toHaveLength(12);
    expect(lines.slice(1).map((e) => e.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(Object.keys(lines[1]).sort()).toEqual(['at', 'data', 'meta', 'schema', 'seq', 'stream', 'type', 'version']);
    expect(lines[1]).toMatchObject({
      type: 'instance.requested',
      schema: 1,
      data: { spec: { appId: 'com.example.notes' } },
    });
  });

  it('unknown ids exit 1; a missing id is a usage error (exit 2)', async () => {
    expect((await runCli(['export', 'inst_nope', '--db', db])).code).toBe(1);
    expect((await runCli(['export', '--db', db])).code).toBe(2);
  });
});

describe('runlog replay --file', () => {
  it('replays an exported history exactly as replay does from the database, for every actor and at --to', async () => {
    for (const id of exported.keys()) {
      const fromDb = await runCli(['replay', id, '--json', '--db', db]);
      const fromFile = await runCli(['replay', '--file', historyFile(id), '--json']);
      expect(fromDb.code).toBe(0);
      expect(fromFile.code).toBe(0);
      expect(JSON.parse(fromFile.stdout())).toEqual(JSON.parse(fromDb.stdout()));
    }
    const atDb = await runCli(['replay', 'inst_web', '--to', '6', '--json', '--db', db]);
    const atFile = await runCli(['replay', '--file', historyFile('inst_web'), '--to', '6', '--json']);
    expect(JSON.parse(atFile.stdout())).toEqual(JSON.parse(atDb.stdout()));
    expect(JSON.parse(atFile.stdout())).toMatchObject({
      to: 6,
      state: 'crashed.backoff',
      context: { lastCrash: { exitCode: 137 } },
    });
  });

  it('needs no database and writes nothing', async () => {
    const nowhere = join(dir, 'no-such-dir', 'runlog.db');
    const r = await runCli([
      'replay',
      '--file',
      historyFile(executionId),
      '--db',
      nowhere,
      '--home',
      join(dir, 'no-home'),
    ]);
    expect(r.code).toBe(0);
    expect(existsSync(nowhere)).toBe(false);
    expect(existsSync(join(dir, 'no-home'))).toBe(false);
    expect(r.out.at(-1)).toMatch(/^v7 .*execution\.succeeded\s+running → succeeded\s+effects: cleanup, announce$/);
  });

  it('--step prints each transition: event, from → to, the effects that ran live, and what changed in the context', async () => {
    const r = await runCli(['replay', '--file', historyFile('inst_web'), '--step']);
    expect(r.code).toBe(0);
    const text = r.stdout();
    const block = (v: number) => text.split('\n\n').find((b) => b.startsWith(`v${v} `))!;
    expect(block(5)).toMatch(
      new RegExp(
        String.raw`^v5 {2}\S+ {2}instance\.tool-granted\n {4}running → running\n` +
          String.raw` {4}effects: provisionTools \{"instanceId":"inst_web","tools":\["curl","git"\]\}\n` +
          String.raw` {4}context:\n {6}\+ spec\.tools\[1\] = "git"$`,
      ),
    );
    expect(block(6)).toContain('running → crashed.backoff');
    expect(block(6)).toContain('effects: releasePort');
    expect(block(6)).toContain('~ pid: 4201 → null');
    expect(block(6)).toContain('~ lastCrash: null → {');
    expect(block(6)).toContain('exitCode: 137');
    expect(block(8)).toContain('~ restarts: 0 → 1');
    // The database path prints the same.
    const fromDb = await runCli(['replay', 'inst_web', '--step', '--db', db]);
    expect(fromDb.stdout()).toBe(text);
  });

  it('--step --json adds the context changes to each step', async () => {
    const r = await runCli(['replay', '--file', historyFile('inst_web'), '--step', '--json', '--to', '5']);
    const view = JSON.parse(r.stdout());
    expect(view.steps).toHaveLength(5);
    expect(view.steps[4].changes).toEqual([{ path: 'spec.tools[1]', op: 'added', after: 'git' }]);
    expect(view.steps[1].changes).toEqual([
      { path: 'pid', op: 'changed', before: null, after: 4201 },
      { path: 'host', op: 'changed', before: null, after: '127.0.0.1' },
      { path: 'port', op: 'changed', before: null, after: 41001 },
    ]);
  });

  it(
    'fails naming the first event with a schema newer than this runlog knows ' +
      '(code REPLAY, exit 4), printing nothing on stdout',
    async () => {
      const file = historyFile('inst_web', (lines) => {
        lines[3].schema = 7;
        lines[5].schema = 9;
      });
      const r = await runCli(['replay', '--file', file, '--json']);
      expect(r.code).toBe(4);
      expect(r.out).toEqual([]);
      const { error } = JSON.parse(r.stderr());
      expect(error.code).toBe('REPLAY');
      expect(error.message).toMatch(
        /^event v3 \(seq \d+\) instance\.healthy: event instance\.healthy has schema 7, newer than this runlog knows \(1\)$/,
      );
      expect(error.details).toMatchObject({ version: 3, type: 'instance.healthy', schema: 7 });
      const text = await runCli(['replay', '--file', file]);
      expect(text.stderr()).toContain('runlog: REPLAY: event v3');
      // Up to the event before it, the history still replays.
      expect((await runCli(['replay', '--file', file, '--to', '2', '--json'])).code).toBe(0);
    },
  );

  it('fails naming the first event whose type this kind does not know', async () => {
    const file = historyFile(executionId, (lines) => {
      lines[4].type = 'execution.teleported';
    });
    const { error } = JSON.parse((await runCli(['replay', '--file', file, '--json'])).stderr());
    expect(error.code).toBe('REPLAY');
    expect(error.message).toMatch(
      /^event v4 \(seq \d+\) execution\.teleported: unknown event type for kind execution; this runlog's execution machine takes /,
    );
  });

  it('fails naming the first event the machine cannot take where it happened', async () => {
    const file = historyFile('inst_web', (lines) => {
      lines[2].type = 'instance.running'; // v2: running while still spawning
    });
    const { error } = JSON.parse((await runCli(['replay', '--file', file, '--json'])).stderr());
    expect(error).toMatchObject({
      code: 'REPLAY',
      details: { version: 2, type: 'instance.running', state: 'spawning' },
    });
    expect(error.message).toContain("cannot take it in state 'spawning'");
  });

  it('lifts old events through the upcasters before folding them', () => {
    const upcasters = new UpcasterRegistry().register({
      type: 'instance.spawned',
      fromSchema: 1,
      // Suppose schema 1 called it processId and schema 2 calls it pid.
      up: ({ processId, ...rest }) => ({ ...rest, pid: processId }),
    });
    const history = parseHistory(
      readFile('inst_web', (lines) => {
        for (const l of lines.slice(1))
          if (l.type === 'instance.spawned')
            l.data = { processId: l.data.pid + 1000, host: l.data.host, port: l.data.port };
      }),
    );
    const view = replayHistory(history, { upcasters, to: 2 });
    expect(view.context).toMatchObject({ pid: 5201, port: 41001 });
    // A registry that knows schema 2 refuses a schema-3 event, naming it.
    const newer = parseHistory(readFile('inst_web', (lines) => (lines[2].schema = 3)));
    expect(() => replayHistory(newer, { upcasters })).toThrow(
      /^event v2 \(seq \d+\) instance\.spawned: event instance\.spawned has schema 3, newer than this runlog knows \(2\)$/,
    );
  });

  it('refuses malformed or truncated files, listing every problem once (exit 4), and a missing file (exit 1)', async () => {
    const truncated = historyFile('inst_web', (lines) => lines.splice(10, 2));
    const t = JSON.parse((await runCli(['replay', '--file', truncated, '--json'])).stderr());
    expect(t.error.code).toBe('HISTORY_INVALID');
    expect(t.error.details.issues).toEqual(['the header says 11 events but the file holds 9 (truncated or edited?)']);
    const broken = historyFile('inst_web', (lines) => {
      lines[2].version = 9;
      delete lines[4].type;
      lines[6].data = 'x';
    });
    const b = JSON.parse((await runCli(['replay', '--file', broken, '--json'])).stderr());
    expect(b.error.details.issues).toEqual([
      'line 3: version is 9, expected 2 (events must be complete and in order)',
      'line 5: type must be a non-empty string',
      'line 7: data must be an object',
    ]);
    // The text message carries every reason exactly once: several as a list …
    const brokenText = (await runCli(['replay', '--file', broken])).stderr();
    expect(brokenText.match(/line 5: type must be a non-empty string/g)).toHaveLength(1);
    expect(brokenText).toContain('line 3: version is 9');
    expect(brokenText).toContain('line 7: data must be an object');
    // … and a single one too (a header with kind "robot" used to print only "malformed header").
    const robot = await runCli(['replay', '--file', historyFile('inst_web', (lines) => (lines[0].kind = 'robot'))]);
    expect(robot.code).toBe(4);
    expect(robot.stderr().match(/kind must be one of instance, execution, not "robot"/g)).toHaveLength(1);
    const notHistory = join(dir, 'not-history.jsonl');
    writeFileSync(notHistory, '{"hello":1}\n');
    expect((await runCli(['replay', '--file', notHistory])).stderr()).toContain('is not a runlog history header');
    const future = historyFile('inst_web', (lines) => (lines[0].format = 2));
    expect((await runCli(['replay', '--file', future])).stderr()).toContain(
      'has history format 2; this runlog reads up to format 1',
    );
    const missing = await runCli(['replay', '--file', join(dir, 'nope.jsonl')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr()).toContain('NOT_FOUND');
    // With --file, an id names the actor to replay (an archive holds many): two ids are a usage error, another
    // actor's id is not found in a history file.
    expect((await runCli(['replay', 'inst_web', 'inst_other', '--file', truncated])).code).toBe(2);
    expect((await runCli(['replay', 'inst_other', '--file', historyFile('inst_web')])).code).toBe(1);
    expect((await runCli(['replay', '--file', historyFile('inst_web'), '--to', '40'])).stderr()).toContain(
      'has 11 events; cannot replay to 40',
    );
  });
});

describe('diffContext', () => {
  it('reports added, removed and changed keys by path, recursing into objects and appended array items', () => {
    expect(
      diffContext({ a: 1, b: { c: 2, d: [1] }, gone: true }, { a: 1, b: { c: 3, d: [1, 2] }, fresh: null }),
    ).toEqual([
      { path: 'b.c', op: 'changed', before: 2, after: 3 },
      { path: 'b.d[1]', op: 'added', after: 2 },
      { path: 'gone', op: 'removed', before: true },
      { path: 'fresh', op: 'added', after: null },
    ]);
    expect(diffContext({ t: ['a', 'b'] }, { t: ['b'] })).toEqual([
      { path: 't', op: 'changed', before: ['a', 'b'], after: ['b'] },
    ]);
    expect(diffContext({ x: { y: 1 } }, { x: { y: 1 } })).toEqual([]);
  });
});

function readFile(id: string, edit: (lines: any[]) => void): string {
  const lines = exported
    .get(id)!
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  edit(lines);
  return `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
}
