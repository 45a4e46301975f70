// The CLI's contract with scripts and people: one exit code per kind of outcome, errors on stderr (one JSON
// object with --json) that state every reason once, idempotent stop, help that lists every flag, "did you
// mean", and a command table whose `ps` path loads no Docker, AT Protocol, tar or XState code.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { writeServerInfo } from '../../../src/cli/client.ts';
import { commandHelp, commonOptions } from '../../../src/cli/command.ts';
import { commands, suggest, version } from '../../../src/cli/main.ts';
import { errorJson, EXIT, exitCodeFor } from '../../../src/cli/output.ts';
import { RunlogError, StoreCorruptError, UsageError, ValidationError, withIssues } from '../../../src/domain/errors.ts';
import { startServer, type RunningServer } from '../../../src/server/http-server.ts';
import { ensureToken } from '../../../src/server/token.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { fakeEffects, seededRunlog } from '../../support/browser.ts';
import { runCli } from '../../support/cli-in-process.ts';
import { tempDir } from '../../support/tmp.ts';

const REPO = resolve(import.meta.dirname, '../../..');

describe('exit codes (one per kind of outcome, derived in one place)', () => {
  let home: string;
  let rl: Runlog;
  let server: RunningServer;
  let stoppedId: string;
  beforeAll(async () => {
    home = tempDir();
    const seeded = await seededRunlog(home);
    rl = seeded.rl;
    stoppedId = seeded.stoppedId;
    // A supervisor the CLI finds as it finds `runlog serve`: server.json and the token in the home.
    const token = ensureToken(home);
    server = await startServer({ runlog: rl, host: '127.0.0.1', port: 0, token: token.token });
    writeServerInfo(home, { url: server.url, pid: process.pid });
  });
  afterAll(async () => {
    await server?.close();
    await rl?.close();
  });

  it('0: ok', async () => {
    const r = await runCli(['ps', '--all', '--home', home]);
    expect(r.code).toBe(EXIT.ok);
    expect(r.stdout()).toContain(stoppedId);
  });

  it('1: not found (an actor, a history file)', async () => {
    expect((await runCli(['inspect', 'inst_nobody', '--home', home])).code).toBe(1);
    expect((await runCli(['replay', '--file', join(home, 'nope.jsonl')])).code).toBe(1);
  });

  it('2: usage (unknown command, unknown flag, a bad value, missing arguments)', async () => {
    expect((await runCli(['frobnicate'])).code).toBe(2);
    expect((await runCli(['ps', '--frob', '--home', home])).code).toBe(2);
    expect((await runCli(['ps', '--kind', 'robot', '--home', home])).code).toBe(2);
    expect((await runCli(['events', '--home', home])).code).toBe(2);
  });

  it('3: no supervisor', async () => {
    const r = await runCli(['stop', 'inst_a', '--home', tempDir()]);
    expect(r.code).toBe(3);
    expect(r.stderr()).toMatch(/^runlog: NO_SUPERVISOR: no supervisor is running for /);
  });

  it('4: damaged or foreign log', async () => {
    const bad = join(tempDir(), 'runlog.db');
    writeFileSync(bad, Buffer.alloc(4096, 7));
    const r = await runCli(['ps', '--db', bad]);
    expect(r.code).toBe(4);
    expect(r.stderr()).toContain('STORE_CORRUPT');
  });

  it('4: also for damage an inspection command finds while reading (its open checks the header, not every page)', async () => {
    const file = join(tempDir(), 'runlog.db');
    const w = new SqliteEventStore(file);
    // More events than one page of reads (512), so the damaged last page comes after sound ones were printed.
    w.append(
      'instance-a',
      Array.from({ length: 2000 }, () => ({ type: 'x.one', data: { pad: 'x'.repeat(500) } })),
      { expectedVersion: 'no-stream' },
    );
    w.close();
    const bytes = readFileSync(file);
    // A table leaf page (page size 4096; b-tree page type 0x0d) three quarters into the log: the events command
    // reads the last page (max seq) and the first pages before it.
    const leaves: number[] = [];
    for (let p = 4096; p + 4096 <= bytes.length; p += 4096) if (bytes[p] === 0x0d) leaves.push(p);
    expect(leaves.length).toBeGreaterThan(100);
    const off = leaves[Math.floor(leaves.length * 0.75)]!;
    bytes.fill(0xa5, off + 1, off + 12);
    writeFileSync(file, bytes);
    const r = await runCli(['events', '--all', '--db', file]);
    expect(r.out.length).toBeGreaterThan(0); // the sound pages before it were printed
    expect(r.code).toBe(4);
    expect(r.stderr()).toContain(`STORE_CORRUPT: event log ${file} is damaged`);
    expect(readFileSync(file).equals(bytes)).toBe(true);
  });

  it("5: conflict with the actor's state (kill of a stopped instance, through the supervisor)", async () => {
    const r = await runCli(['kill', stoppedId, '--home', home]);
    expect(r.code).toBe(5);
    expect(r.stderr()).toMatch(
      new RegExp(`ILLEGAL_EVENT: ${stoppedId} is stopped: it cannot take instance.kill-requested`),
    );
  });

  it('stop of a stopped instance succeeds, every time (as docker stop does)', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await runCli(['stop', stoppedId, '--json', '--home', home]);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout())).toMatchObject({ id: stoppedId, state: 'stopped' });
    }
  });

  it('--json errors go to stderr as one JSON object; stdout stays empty', async () => {
    for (const args of [
      ['inspect', 'inst_nobody', '--json', '--home', home],
      ['stop', 'x', '--json', '--home', tempDir()],
      ['nope', '--json'],
    ]) {
      const r = await runCli(args);
      expect(r.out).toEqual([]);
      expect(r.err).toHaveLength(1);
      expect(JSON.parse(r.err[0]!).error.code).toMatch(/^(NOT_FOUND|NO_SUPERVISOR|USAGE)$/);
    }
  });

  it('maps codes the API sends back exactly as local errors of the same code', () => {
    expect(exitCodeFor(new RunlogError('ILLEGAL_EVENT', 'x'))).toBe(5);
    expect(exitCodeFor(new RunlogError('CONCURRENCY', 'x'))).toBe(5);
    expect(exitCodeFor(new RunlogError('NO_SUPERVISOR', 'x'))).toBe(3);
    expect(exitCodeFor(new StoreCorruptError('/x', 'bad'))).toBe(4);
    expect(exitCodeFor(new RunlogError('STORE_FOREIGN', 'x'))).toBe(4);
    expect(exitCodeFor(new RunlogError('NOT_FOUND', 'x'))).toBe(1);
    expect(exitCodeFor(new UsageError('x'))).toBe(2);
    expect(exitCodeFor(new ValidationError('MANIFEST_INVALID', 'x', ['a']))).toBe(2);
    expect(exitCodeFor(new Error('bug'))).toBe(1);
  });
});

describe('errors state every reason once', () => {
  it('one issue is in the message; several are listed once each', () => {
    expect(
      new ValidationError('INPUT_INVALID', 'malformed header', ['kind must be one of instance, execution']).message,
    ).toBe('malformed header: kind must be one of instance, execution');
    const many = new ValidationError('INPUT_INVALID', 'invalid', ['a is wrong', 'b is wrong']);
    expect(many.message).toBe('invalid:\n  - a is wrong\n  - b is wrong');
    // A message that already states its issues (a caller's own wording, or one that came back from the API).
    expect(new ValidationError('INPUT_INVALID', 'invalid: a is wrong', ['a is wrong']).message).toBe(
      'invalid: a is wrong',
    );
    expect(new ValidationError('INPUT_INVALID', many.message, many.issues).message).toBe(many.message);
    expect(withIssues('m', [])).toBe('m');
    const json = errorJson(many);
    expect(json.error).toMatchObject({
      code: 'INPUT_INVALID',
      message: many.message,
      issues: ['a is wrong', 'b is wrong'],
    });
  });

  it('a manifest error names the file the user edits, not the workspace copy', async () => {
    const home = tempDir();
    const app = join(tempDir(), 'my-app');
    mkdirSync(app, { recursive: true });
    writeFileSync(
      join(app, 'runlog.json'),
      JSON.stringify({ appId: 'com.example.mine', runtime: 'raw', sandbox: 'proot', colour: 'blue' }),
    );
    const rl = await createRunlog({
      home,
      effects: fakeEffects(),
      reconcile: false,
      watchApps: false,
      log: () => undefined,
    });
    try {
      const err = (await rl.spawnApp({ appDir: app }).then(
        () => null,
        (e: unknown) => e,
      )) as ValidationError;
      expect(err).toBeInstanceOf(ValidationError);
      expect(err.message).toContain(`${app}/runlog.json`);
      expect(err.message).toContain(`${app}/entrypoint.sh`);
      expect(err.message).not.toContain(join(home, 'workspace'));
      expect(err.message.match(/unknown field 'colour'/g)).toHaveLength(1);
    } finally {
      await rl.close();
    }
  });
});

describe('discoverability', () => {
  it('`runlog` alone prints help and exits 0; --version prints the package version', async () => {
    const r = await runCli([]);
    expect(r.code).toBe(0);
    for (const c of commands) expect(r.stdout()).toContain(`  ${c.name} `);
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8'));
    expect(version()).toBe(pkg.version);
    const v = await runCli(['--version']);
    expect(v.code).toBe(0);
    expect(v.stdout()).toBe(pkg.version);
  });

  it('suggests the command a typo meant', async () => {
    expect(suggest('repaly')).toEqual(['replay']);
    expect(suggest('inspec')).toEqual(['inspect']);
    expect(suggest('xyzzy')).toEqual([]);
    const r = await runCli(['evnets']);
    expect(r.code).toBe(2);
    expect(r.stderr()).toContain("unknown command 'evnets'; did you mean 'events'?");
  });

  it('suggests the command when two neighbouring letters are swapped (sapwn), exit 2 USAGE', async () => {
    expect(suggest('sapwn')).toEqual(['spawn']);
    const r = await runCli(['sapwn', '--json']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stderr())).toMatchObject({
      error: { code: 'USAGE', message: expect.stringContaining("unknown command 'sapwn'; did you mean 'spawn'?") },
    });
  });

  it("every command's --help lists each of its flags with its default, the common flags and an example", async () => {
    for (const c of commands) {
      const r = await runCli([c.name, '--help']);
      expect(r.code, c.name).toBe(0);
      const text = r.stdout();
      expect(text).toBe(commandHelp(c));
      expect(text).toContain(`usage: ${c.usage}`);
      for (const [name, spec] of Object.entries({ ...c.options, ...commonOptions })) {
        const line = text.split('\n').find((l) => l.includes(`--${name}`) && l.includes(spec.description));
        expect(line, `${c.name} --${name}`).toBeDefined();
        if (spec.default !== undefined || spec.defaultText !== undefined)
          expect(line, `${c.name} --${name}`).toMatch(/\(default: .+\)$/);
      }
      expect(c.examples.length, c.name).toBeGreaterThan(0);
      expect(text).toMatch(/\nexamples?:\n {2}\S/);
    }
  });

  it("every command has its line in the README's command table, and the README names the common flags", () => {
    // Every flag of every command is in docs/reference/cli.md, generated from these definitions and checked by
    // test/unit/repo/docs-reference.test.ts; the README keeps one line per command.
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    for (const c of commands) {
      const rows = readme.split('\n').filter((l) => l.startsWith(`| \`runlog ${c.name}`));
      expect(rows, `one README row for runlog ${c.name}`).toHaveLength(1);
    }
    for (const name of ['home', 'db', 'store', 'json']) expect(readme).toContain(`--${name}`);
  });
});

describe('a fast CLI: what `runlog ps` loads', () => {
  /** Static (value) imports of a TypeScript module, resolved to files or package names. */
  function staticImports(file: string): string[] {
    const text = readFileSync(file, 'utf8');
    const out: string[] = [];
    for (const m of text.matchAll(/^(?:import|export)\s+(?!type\b)(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)) {
      const spec = m[1]!;
      out.push(spec.startsWith('.') ? resolve(file, '..', spec) : spec);
    }
    return out;
  }
  function closure(entries: string[]): Set<string> {
    const seen = new Set<string>();
    const todo = [...entries];
    while (todo.length > 0) {
      const f = todo.pop()!;
      if (seen.has(f)) continue;
      seen.add(f);
      if (f.endsWith('.ts')) todo.push(...staticImports(f));
    }
    return seen;
  }

  it('the command table and the store reader, nothing of Docker, AT Protocol, tar or XState', () => {
    const main = join(REPO, 'src/cli/main.ts');
    // What `ps` imports when it runs: the store, through the one function inspection opens the log with.
    const dynamic = [
      ...readFileSync(join(REPO, 'src/cli/inspection-log.ts'), 'utf8').matchAll(/import\('([^']+)'\)/g),
    ].map((m) => resolve(REPO, 'src/cli', m[1]!));
    expect(dynamic).toEqual([join(REPO, 'src/store/postgres/open.ts'), join(REPO, 'src/store/sqlite/port-adapter.ts')]);
    const heavyOf = (loaded: string[]) =>
      loaded.filter(
        (f) =>
          /^(xstate|dockerode|tar-stream|@atproto\/|@ipld\/|multiformats)/.test(f) ||
          /\/src\/(machines|adapters|server\/(?!listen\.ts))/.test(f),
      );
    const packages = (loaded: string[]) => loaded.filter((f) => !f.startsWith('/') && !f.startsWith('node:')).sort();
    // A SQLite log (the default): the SQLite reader and nothing else.
    const sqlite = [...closure([main, dynamic[1]!])];
    expect(heavyOf(sqlite)).toEqual([]);
    expect(packages(sqlite)).toEqual(['better-sqlite3']);
    // --store postgres://…: node-postgres alone (no SQLite binding), still nothing heavy.
    const pg = [...closure([main, dynamic[0]!])];
    expect(heavyOf(pg)).toEqual([]);
    expect(packages(pg)).toEqual(['pg']);
  });

  it('`events <id>` resolves the id with the store alone: no XState before its first line', () => {
    const commands = readFileSync(join(REPO, 'src/cli/commands/inspect-commands.ts'), 'utf8');
    const events = commands.slice(
      commands.indexOf('export const eventsCommand'),
      commands.indexOf('async function followLog'),
    );
    const dynamic = [...events.matchAll(/import\('([^']+)'\)/g)].map((m) => resolve(REPO, 'src/cli/commands', m[1]!));
    expect(dynamic).toEqual([join(REPO, 'src/inspect/resolve-actor.ts')]);
    const heavy = [...closure(dynamic)].filter((f) => /^xstate/.test(f) || /\/src\/(machines|adapters)/.test(f));
    expect(heavy).toEqual([]);
  });
});
