// Inspection never writes. Every inspection command (ps, inspect, events, replay, export) runs on a read-only
// copy of a log as a non-root user (nobody, through setpriv: real CLI processes), and on a missing
// path, an empty file and a truncated file: the first works, the others are refused with a typed error, and in
// every case no file or directory is created or changed (checksums of the tree before and after).
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { main } from '../../../src/cli/main.ts';
import { instanceSpec } from '../../support/browser.ts';
import { spawnSync } from 'node:child_process';
import { runCli, REPO_ROOT } from '../../support/cli-process.ts';
import { capture } from '../../support/cli-in-process.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const CLI_MANY = join(import.meta.dirname, '../../support', 'cli-many.ts');

const NOBODY = 65534;
let root: string;
let source: string;

/** Every path under dir with its type, mode, size and content hash. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) {
        out[p] = `dir ${(st.mode & 0o7777).toString(8)}`;
        walk(p);
      } else
        out[p] =
          `file ${(st.mode & 0o7777).toString(8)} ${st.size} ${createHash('sha256').update(readFileSync(p)).digest('hex')} ${st.mtimeMs}`;
    }
  };
  walk(dir);
  return out;
}

const COMMANDS = (id: string): string[][] => [
  ['ps'],
  ['ps', '--all', '--json'],
  ['inspect', id],
  ['inspect', id, '--json'],
  ['events', id],
  ['events', '--all', '--json'],
  ['replay', id],
  ['replay', id, '--to', '2', '--step'],
  ['export', id],
];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'runlog-ro-'));
  chmodSync(root, 0o755); // nobody must be able to reach the read-only copy
  source = join(root, 'source');
  // A history written without effects (a writer holding the lock), then closed: a self-contained file.
  const rl = await createRunlog({ home: source, supervise: false, readOnly: false });
  await runlogInternals(rl).host.create('instance', 'inst_a', {
    type: 'instance.requested',
    data: { spec: instanceSpec({ instanceId: 'inst_a' }) },
  });
  await rl.send('instance', 'inst_a', { type: 'instance.spawned', data: { pid: 7, host: '127.0.0.1', port: 4100 } });
  await rl.send('instance', 'inst_a', { type: 'instance.healthy', data: { identity: 'match' } });
  await rl.close();
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('inspection opens the log read-only', () => {
  it(
    'every inspection command works on a read-only copy as a non-root user, and creates or changes nothing',
    { timeout: 300_000 },
    () => {
      const ro = join(root, 'ro');
      mkdirSync(ro);
      copyFileSync(join(source, 'runlog.db'), join(ro, 'runlog.db'));
      chmodSync(join(ro, 'runlog.db'), 0o444);
      chmodSync(ro, 0o555);
      const before = snapshot(root);
      // One real process as nobody runs every command through the CLI's main (one tsx start-up, not nine).
      const runs = COMMANDS('inst_a').map((args) => [...args, '--db', join(ro, 'runlog.db')]);
      const r = spawnSync(
        '/usr/bin/setpriv',
        [
          `--reuid=${NOBODY}`,
          `--regid=${NOBODY}`,
          '--clear-groups',
          process.execPath,
          '--import',
          'tsx',
          CLI_MANY,
          JSON.stringify(runs),
        ],
        {
          cwd: REPO_ROOT,
          env: { ...process.env, HOME: '/nonexistent' },
          encoding: 'utf8',
          timeout: 240_000,
        },
      );
      expect(r.status, r.stderr).toBe(0);
      const results = JSON.parse(r.stdout) as { code: number; stdout: string; stderr: string }[];
      runs.forEach((args, i) => {
        expect(results[i]!.code, `${args.join(' ')}: ${results[i]!.stderr}`).toBe(0);
        expect(results[i]!.stdout, args.join(' ')).toMatch(/inst_a|instance\.requested/); // replay prints the steps, the others the id
      });
      expect(snapshot(root)).toEqual(before);
    },
  );

  it(
    'reads a log copied with its -wal in a read-only directory as a non-root user, and creates nothing there',
    { timeout: 300_000 },
    async () => {
      // A writer still open: its -wal holds commits; the copy is the database and the WAL, without the -shm.
      const walSource = join(root, 'wal-source');
      const rl = await createRunlog({ home: walSource, supervise: false, readOnly: false });
      await runlogInternals(rl).host.create('instance', 'inst_w', {
        type: 'instance.requested',
        data: { spec: instanceSpec({ instanceId: 'inst_w' }) },
      });
      await rl.send('instance', 'inst_w', {
        type: 'instance.spawned',
        data: { pid: 8, host: '127.0.0.1', port: 4101 },
      });
      const ro = join(root, 'ro-wal');
      mkdirSync(ro);
      copyFileSync(join(walSource, 'runlog.db'), join(ro, 'runlog.db'));
      copyFileSync(join(walSource, 'runlog.db-wal'), join(ro, 'runlog.db-wal'));
      await rl.close();
      expect(statSync(join(ro, 'runlog.db-wal')).size).toBeGreaterThan(0);
      chmodSync(join(ro, 'runlog.db'), 0o444);
      chmodSync(join(ro, 'runlog.db-wal'), 0o444);
      chmodSync(ro, 0o555);
      const before = snapshot(ro);
      const runs = [
        ['inspect', 'inst_w', '--json'],
        ['events', 'inst_w', '--json'],
        ['replay', 'inst_w', '--json'],
      ].map((args) => [...args, '--db', join(ro, 'runlog.db')]);
      const r = spawnSync(
        '/usr/bin/setpriv',
        [
          `--reuid=${NOBODY}`,
          `--regid=${NOBODY}`,
          '--clear-groups',
          process.execPath,
          '--import',
          'tsx',
          CLI_MANY,
          JSON.stringify(runs),
        ],
        {
          cwd: REPO_ROOT,
          env: { ...process.env, HOME: '/nonexistent', TMPDIR: '/tmp' },
          encoding: 'utf8',
          timeout: 240_000,
        },
      );
      expect(r.status, r.stderr).toBe(0);
      const [inspect, events, replay] = JSON.parse(r.stdout) as { code: number; stdout: string; stderr: string }[];
      for (const x of [inspect!, events!, replay!]) expect(x.code, x.stderr).toBe(0);
      expect(JSON.parse(inspect!.stdout)).toMatchObject({ id: 'inst_w', state: 'spawning', version: 2 });
      expect(
        events!.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l).type),
      ).toEqual(['instance.requested', 'instance.spawned']);
      expect(JSON.parse(replay!.stdout)).toMatchObject({ id: 'inst_w', to: 2 });
      expect(snapshot(ro)).toEqual(before);
    },
  );

  it(
    'refuses a missing path (LOG_MISSING), ' +
      'an empty file (STORE_EMPTY) and a truncated one (STORE_TRUNCATED), creating nothing',
    async () => {
      const missing = join(root, 'typo', 'runlog.db');
      const emptyDir = join(root, 'empty');
      mkdirSync(emptyDir);
      writeFileSync(join(emptyDir, 'runlog.db'), '');
      const truncDir = join(root, 'truncated');
      mkdirSync(truncDir);
      copyFileSync(join(source, 'runlog.db'), join(truncDir, 'runlog.db'));
      const size = statSync(join(truncDir, 'runlog.db')).size;
      expect(size).toBeGreaterThan(8192);
      truncateSync(join(truncDir, 'runlog.db'), 4096); // the header page survives; the tables are gone
      const before = snapshot(root);
      const cases: [string, string][] = [
        [missing, 'LOG_MISSING'],
        [join(emptyDir, 'runlog.db'), 'STORE_EMPTY'],
        [join(truncDir, 'runlog.db'), 'STORE_TRUNCATED'],
      ];
      for (const [db, code] of cases) {
        for (const args of COMMANDS('inst_a')) {
          const c = capture();
          const exit = await main([...args, '--db', db], c.factory);
          expect(exit, `${args.join(' ')} on ${db}`).not.toBe(0);
          expect(c.text(), `${args.join(' ')} on ${db}`).toContain(code);
          if (code === 'LOG_MISSING') expect(c.text()).toContain(`no log at ${db}`);
        }
      }
      expect(snapshot(root)).toEqual(before);
      expect(readdirSync(root)).not.toContain('typo');
    },
  );

  it('a missing path is refused the same way as another user, through the real CLI', { timeout: 180_000 }, () => {
    const r = runCli(['ps', '--db', join(root, 'nothere', 'runlog.db')], {
      user: NOBODY,
      env: { HOME: '/nonexistent' },
    });
    expect(r.code).not.toBe(0);
    expect(`${r.stdout}${r.stderr}`).toContain('LOG_MISSING');
    expect(readdirSync(root)).not.toContain('nothere');
  });
});
