// CLI benchmarks: what a user waits for when runlog is called in a loop or a script. Each round starts a fresh
// `node` process for the compiled CLI and one for the raw primitive, interleaved so both see the same machine.
//
// - cli.ps: `runlog ps --json` on a log of 1,000 live actors, beside a `node` process that opens the same file
//   with better-sqlite3, selects the same rows and prints the same JSON. Target ≤ 150 ms, ratio ≤ 1.5.
// - cli.events-first-line: `runlog events <id> --json | head -1` on a log of 1,000,000 events: time from the process
//   start to its first line on stdout (the reader then goes away, as with `head -1`), beside a `node` process whose
//   better-sqlite3 reads the same actor's first row and prints it. Notes: how long opening the log read-only takes
//   (openMs, part of the figure) and what a writer's open (its whole-file quick_check) takes on the same file.
// - cli.events-all-first-line: the same for `runlog events --all --json | head -1`, beside better-sqlite3
//   `iterate()` over the whole log printing its first row; notes: opening the log read-only to holding its first
//   event, in process (openToFirstEventMs, the "≤ 100 ms after open"), and the peak RSS of printing the
//   whole log (MB), both.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { collect, type StreamAppend } from '../src/store/port.ts';
import { SqlitePortStore } from '../src/store/sqlite/port-adapter.ts';
import { median, nowMs, round, sideBySide, sizes, type Bench, type RunOptions } from './harness.ts';

const REPO = resolve(import.meta.dirname, '..');
const BIN = join(REPO, 'bin/runlog.js');

/** The CLI must be the compiled one (what users run): no TypeScript loader in the measurement. */
function requireBuild(): void {
  if (!existsSync(join(REPO, 'dist/cli/main.js')))
    throw new Error('the compiled CLI (dist/cli/main.js) is missing: run `npm run build` first');
}

const at = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();

/** A log of `n` running app instances, written in a few transactions. */
export async function writeActors(file: string, n: number): Promise<void> {
  const store = new SqlitePortStore(file, { skipQuickCheck: true });
  const requests: StreamAppend[] = [];
  for (let i = 0; i < n; i++) {
    const id = `inst_${String(i).padStart(6, '0')}`;
    const stream = `instance-${id}`;
    const summary = {
      appId: 'com.example.hello',
      sandbox: i % 2 ? 'container' : 'proot',
      port: 41000 + i,
      restarts: 0,
    };
    requests.push({
      stream,
      events: [
        {
          type: 'instance.requested',
          data: { spec: { instanceId: id, appId: 'com.example.hello', sandbox: summary.sandbox, tools: ['bash'] } },
          at: at(i),
        },
        { type: 'instance.spawned', data: { pid: 1000 + i, host: '127.0.0.1', port: summary.port }, at: at(i) },
        { type: 'instance.healthy', data: { identity: 'match' }, at: at(i) },
        { type: 'instance.running', data: {}, at: at(i) },
      ],
      expectedVersion: 'no-stream',
      row: {
        id,
        kind: 'instance',
        stream,
        state: 'running',
        status: 'active',
        version: 4,
        createdAt: at(i),
        updatedAt: at(i),
        summary,
      },
    });
  }
  for (let i = 0; i < requests.length; i += 250) await store.appendMany(requests.slice(i, i + 250));
  await store.close();
}

/** A log of `n` events over many streams, written in large transactions. */
async function writeEvents(file: string, n: number): Promise<void> {
  const store = new SqlitePortStore(file, { skipQuickCheck: true, synchronous: 'NORMAL' });
  const perStream = 100;
  for (let s = 0; s * perStream < n;) {
    const requests: StreamAppend[] = [];
    for (let k = 0; k < 100 && s * perStream < n; k++, s++) {
      const events = Array.from({ length: perStream }, (_, v) => ({
        type: 'instance.spawned',
        data: { pid: v, host: '127.0.0.1', port: 41000 + v },
        at: at(v),
      }));
      requests.push({ stream: `instance-bench_${s}`, events, expectedVersion: 'no-stream' });
    }
    await store.appendMany(requests);
  }
  await store.close();
}

/** Runs a command to its end; wall time in ms. */
function timeRun(cmd: string, args: string[]): { ms: number; stdout: string } {
  const t0 = nowMs();
  const r = spawnSync(cmd, args, { cwd: REPO, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const ms = nowMs() - t0;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return { ms, stdout: r.stdout };
}

/**
 * Time from spawn to the first full line on stdout; then the reader goes away (like `| head -1`) and the result
 * comes once the process has ended, so a process still printing never overlaps the next measurement.
 */
function timeFirstLine(cmd: string, args: string[]): Promise<number> {
  return new Promise((resolveLine, reject) => {
    const t0 = nowMs();
    const child = spawn(cmd, args, { cwd: REPO, stdio: ['ignore', 'pipe', 'inherit'] });
    let firstLineMs: number | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      if (firstLineMs !== undefined || !chunk.includes(10)) return;
      firstLineMs = nowMs() - t0;
      child.stdout.destroy();
    });
    child.stdout.on('error', () => undefined);
    const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(killer);
      if (firstLineMs === undefined)
        reject(new Error(`${cmd} ${args.join(' ')} exited ${code} before printing a line`));
      else resolveLine(firstLineMs);
    });
  });
}

/** Peak resident memory (MB) of a command run to its end with stdout discarded. */
function peakRssMb(cmd: string, args: string[]): number {
  const r = spawnSync('/usr/bin/time', ['-f', '%M', cmd, ...args], {
    cwd: REPO,
    encoding: 'utf8',
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  if (r.status !== 0) throw new Error(`${cmd} exited ${r.status}: ${r.stderr}`);
  return round(Number(r.stderr.trim().split('\n').at(-1)) / 1024);
}

// The same rows, and as ps does, whether a supervisor's heartbeat is fresh (no more than three intervals old) and
// where an archived actor's events went (its tombstone's archive; null for the rest).
export const RAW_PS = `
const Database = require('better-sqlite3');
const db = new Database(process.argv[1], { readonly: true });
const rows = db.prepare(\`SELECT actors.*, archives.file AS archived_to, archives.created_at AS archived_at FROM actors
  LEFT JOIN tombstones ON tombstones.stream = actors.stream LEFT JOIN archives ON archives.id = tombstones.archive
  WHERE actors.status = 'active' ORDER BY actors.created_at, actors.id\`).all();
const hb = db.prepare('SELECT beat_at, interval_ms, stopped_at FROM supervisor_heartbeat WHERE id = 1').get();
const supervised = hb !== undefined && hb.stopped_at === null && Date.now() - Date.parse(hb.beat_at) <= hb.interval_ms * 3;
const heartbeatAt = hb === undefined ? null : hb.beat_at;
process.stdout.write(JSON.stringify(rows.map((r) => ({ id: r.id, kind: r.kind, state: r.state, status: r.status, version: r.version,
  createdAt: r.created_at, updatedAt: r.updated_at, summary: JSON.parse(r.summary), supervised, heartbeatAt,
  archived: r.archived_to === null ? null : { file: r.archived_to, at: r.archived_at ?? '' } })), null, 2) + '\\n');
`;

/**
 * A `node -e` script: better-sqlite3 runs `query` (bound to `params`, an expression) and prints each row as
 * `runlog events --json` does, with plain write(2)s, until its reader goes away (`head -1`), as runlog's CLI stops.
 */
const rawEvents = (query: string, params = ''): string => `
const Database = require('better-sqlite3');
const { writeSync } = require('node:fs');
const db = new Database(process.argv[1], { readonly: true });
for (const r of db.prepare('${query}').iterate(${params})) {
  const line = JSON.stringify({ seq: r.seq, stream: r.stream, version: r.version, type: r.type, schema: r.schema,
    data: JSON.parse(r.data), meta: JSON.parse(r.meta), at: r.at }) + '\\n';
  try {
    writeSync(1, line);
  } catch {
    break;
  }
}
`;
const RAW_EVENTS = rawEvents('SELECT * FROM events ORDER BY seq');
const RAW_STREAM_EVENTS = rawEvents('SELECT * FROM events WHERE stream = ? ORDER BY version', 'process.argv[2]');

/** How many events the log both events benches read holds (a smoke run's is small). */
const eventsCount = (opts: RunOptions): number => sizes(opts, { full: 1_000_000, smoke: 10_000 });

/** The log both events benches read, one per size: written once per bench run, removed at exit. */
const eventsLogs = new Map<number, string>();
async function bigEventsLog(events: number, log: (msg: string) => void): Promise<string> {
  const known = eventsLogs.get(events);
  if (known) return known;
  const dir = mkdtempSync(join(tmpdir(), 'runlog-bench-cli-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const db = join(dir, 'runlog.db');
  log(`writing a log of ${events} events…`);
  await writeEvents(db, events);
  eventsLogs.set(events, db);
  return db;
}

/** Medians of the time to the first line, ours and raw interleaved; the first lines must be the same event. */
async function firstLines(rounds: number, cli: string[], raw: string[]): Promise<{ ours: number; base: number }> {
  const a = JSON.parse(firstLineOf(process.execPath, cli));
  const b = JSON.parse(firstLineOf(process.execPath, raw));
  if (JSON.stringify(a) !== JSON.stringify(b))
    throw new Error(
      `runlog and the raw query print different first lines: ${JSON.stringify(a)} / ${JSON.stringify(b)}`,
    );
  const ours: number[] = [];
  const base: number[] = [];
  for (let i = 0; i < rounds; i++) {
    ours.push(await timeFirstLine(process.execPath, cli));
    base.push(await timeFirstLine(process.execPath, raw));
  }
  return { ours: median(ours), base: median(base) };
}

/** The first line a command prints (it is stopped there). */
function firstLineOf(cmd: string, args: string[]): string {
  const r = spawnSync('/bin/sh', ['-c', '"$0" "$@" | head -1', cmd, ...args], {
    cwd: REPO,
    encoding: 'utf8',
    maxBuffer: 1024 * 1024,
  });
  if (r.status !== 0 || !r.stdout)
    throw new Error(`${cmd} ${args.join(' ')} | head -1 exited ${r.status}: ${r.stderr}`);
  return r.stdout.trim();
}

/** Median time (ms) to open the log as `options` says (and with `firstEvent`, to read its first event) and close it. */
async function openMs(
  db: string,
  rounds: number,
  options: { readOnly?: boolean },
  firstEvent = false,
): Promise<number> {
  const times: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = nowMs();
    const store = new SqlitePortStore(db, options);
    if (firstEvent && (await collect(store.readAll({ limit: 1 }))).length === 0) throw new Error('the log is empty');
    await store.close();
    times.push(nowMs() - t0);
  }
  return median(times);
}

export const cliBenches: Bench[] = [
  {
    name: 'cli.ps',
    needs: 'the compiled CLI (npm run build)',
    async run(opts) {
      const { rounds, log } = opts;
      const { actors, samples } = sizes(opts, {
        full: { actors: 1000, samples: Math.max(10, rounds * 4) },
        smoke: { actors: 50, samples: 1 },
      });
      requireBuild();
      const dir = mkdtempSync(join(tmpdir(), 'runlog-bench-cli-'));
      try {
        const db = join(dir, 'runlog.db');
        await writeActors(db, actors);
        const cli = [BIN, 'ps', '--json', '--db', db];
        const raw = ['-e', RAW_PS, db];
        // Same answer, or the comparison means nothing.
        const a = JSON.parse(timeRun(process.execPath, cli).stdout);
        const b = JSON.parse(timeRun(process.execPath, raw).stdout);
        if (a.length !== actors || JSON.stringify(a) !== JSON.stringify(b))
          throw new Error('runlog ps --json and the raw query disagree');
        const ours: number[] = [];
        const base: number[] = [];
        for (let i = 0; i < samples; i++) {
          ours.push(timeRun(process.execPath, cli).ms);
          base.push(timeRun(process.execPath, raw).ms);
        }
        log(`cli.ps: ${samples} runs each`);
        const v = median(ours);
        const r = median(base);
        return sideBySide('cli.ps', 'ms', v, r, { actors, runs: samples });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  },
  {
    name: 'cli.events-first-line',
    needs: 'the compiled CLI (npm run build)',
    async run(opts) {
      const { rounds, log } = opts;
      const EVENTS = eventsCount(opts);
      requireBuild();
      const db = await bigEventsLog(EVENTS, log);
      // An actor in the middle of the log (of 1,000,000 events: its 100 events are seqs 500,001…500,100).
      const id = `bench_${EVENTS / 200}`;
      const { ours, base } = await firstLines(
        rounds,
        [BIN, 'events', id, '--json', '--db', db],
        ['-e', RAW_STREAM_EVENTS, db, `instance-${id}`],
      );
      const notes = {
        events: EVENTS,
        openMs: round(await openMs(db, rounds, { readOnly: true })),
        writerOpenMs: round(await openMs(db, Math.min(rounds, 3), {})),
      };
      return {
        name: 'cli.events-first-line',
        value: round(ours),
        unit: 'ms',
        baseline: round(base),
        ratio: round(ours / base),
        notes,
      };
    },
  },
  {
    name: 'cli.events-all-first-line',
    needs: 'the compiled CLI (npm run build)',
    async run(opts) {
      const { rounds, log } = opts;
      const EVENTS = eventsCount(opts);
      requireBuild();
      const db = await bigEventsLog(EVENTS, log);
      const cli = [BIN, 'events', '--all', '--json', '--db', db];
      const raw = ['-e', RAW_EVENTS, db];
      const { ours, base } = await firstLines(rounds, cli, raw);
      log('printing the whole log to /dev/null for the peak RSS…');
      // In this process, no start-up: opening the log read-only to holding its first event (target ≤ 100 ms).
      const openToFirstEventMs = round(await openMs(db, rounds, { readOnly: true }, true));
      const notes = {
        events: EVENTS,
        openToFirstEventMs,
        peakRssMb: peakRssMb(process.execPath, cli),
        rawPeakRssMb: peakRssMb(process.execPath, raw),
      };
      return {
        name: 'cli.events-all-first-line',
        value: round(ours),
        unit: 'ms',
        baseline: round(base),
        ratio: round(ours / base),
        notes,
      };
    },
  },
];
