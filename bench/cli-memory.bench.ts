// Peak memory of the compiled CLI's streaming commands, each beside a raw `node` process doing the same work, as
// the peak resident set of the whole process (/usr/bin/time's %M, the kernel's VmHWM), one run each.
//
// - cli.replay-file.rss: `runlog replay --file <history.jsonl>` (text, a line per transition) on one instance's
//   exported history, beside a `node` process that reads the same file line by line, parses each event and folds
//   it through the same compiled machine (dist/machines/runtime.js), printing a line per step.
// - cli.events-all.rss: `runlog events --all --json` on a log of many events, beside better-sqlite3 `iterate()`
//   printing each row as the same JSON line.
//
// The CLI keeps V8's young generation at its starting size in these commands (src/cli/young-generation.ts); the
// raw processes run with node's defaults, as a user's own script would.
//
// Target ≤ 1.2× the raw process for both. Sizes: RUNLOG_BENCH_REPLAY_EVENTS (default 100,000) and
// RUNLOG_BENCH_EVENTS_ALL (default 1,000,000); `--smoke` uses 2,000 and 20,000, a run of seconds.
import { spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { historyHeaderLine } from '../src/domain/history.ts';
import type { StreamAppend } from '../src/store/port.ts';
import { SqlitePortStore } from '../src/store/sqlite/port-adapter.ts';
import { round, sizes, type Bench, type BenchResult, type RunOptions } from './harness.ts';

const REPO = resolve(import.meta.dirname, '..');
const BIN = join(REPO, 'bin/runlog.js');

function requireBuild(): void {
  if (!existsSync(join(REPO, 'dist/cli/main.js')))
    throw new Error('the compiled CLI (dist/cli/main.js) is missing: run `npm run build` first');
}

/** The size to use: the smoke size, else the environment's, else the default. */
function size(opts: Pick<RunOptions, 'smoke'>, env: string, full: number, smoke: number): number {
  const n = Number(process.env[env]);
  return sizes(opts, { full: Number.isSafeInteger(n) && n > 0 ? n : full, smoke });
}

/** Peak resident memory (MB) of a command run to its end with stdout discarded. */
function peakRssMb(args: string[]): number {
  const r = spawnSync('/usr/bin/time', ['-f', '%M', process.execPath, ...args], {
    cwd: REPO,
    encoding: 'utf8',
    stdio: ['ignore', 'ignore', 'pipe'],
    maxBuffer: 16 * 1024 * 1024,
  });
  if (r.status !== 0)
    throw new Error(`node ${args.slice(0, 3).join(' ')} exited ${r.status}: ${r.stderr.slice(-2000)}`);
  return round(Number(r.stderr.trim().split('\n').at(-1)) / 1024);
}

function result(name: string, ours: number, raw: number, notes: Record<string, number | string>): BenchResult {
  return {
    name,
    value: ours,
    unit: 'MB',
    baseline: raw,
    ratio: round(ours / raw),
    notes: { ...notes, target: '≤ 1.2×' },
  };
}

const at = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();

/** An exported history (runlog export's format) of one running instance whose tools are granted and revoked. */
async function writeHistory(file: string, n: number): Promise<void> {
  const id = 'inst_mem';
  const stream = `instance-${id}`;
  const spec = {
    instanceId: id,
    appId: 'com.example.hello',
    appDir: '/apps/hello',
    sandbox: 'proot',
    runtime: 'raw',
    tools: [],
    lifecycleBasePath: '',
    restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 10, maxBackoffMs: 20, resetAfterMs: 1000 },
  };
  const event = (v: number): { type: string; data: unknown } => {
    if (v === 1) return { type: 'instance.requested', data: { spec } };
    if (v === 2)
      return { type: 'instance.spawned', data: { pid: 4242, host: '127.0.0.1', port: 4100, containerId: null } };
    if (v === 3) return { type: 'instance.healthy', data: { identity: 'match' } };
    if (v === 4) return { type: 'instance.running', data: {} };
    return { type: v % 2 ? 'instance.tool-revoked' : 'instance.tool-granted', data: { tool: `tool-${v % 13}` } };
  };
  const out = createWriteStream(file);
  const write = (line: string) =>
    out.write(`${line}\n`) ? Promise.resolve() : new Promise<void>((r) => out.once('drain', () => r()));
  await write(historyHeaderLine({ kind: 'instance', id, stream, version: n }, at(0)));
  for (let v = 1; v <= n; v++)
    await write(JSON.stringify({ seq: v, stream, version: v, ...event(v), schema: 1, meta: {}, at: at(v) }));
  await new Promise<void>((r, j) => out.end((err?: Error | null) => (err ? j(err) : r())));
}

/** A log of `n` events over streams of 100, written in large transactions (as cli.bench.ts writes its own). */
async function writeEvents(file: string, n: number): Promise<void> {
  const store = new SqlitePortStore(file, { skipQuickCheck: true, synchronous: 'NORMAL' });
  try {
    const perStream = 100;
    for (let s = 0; s * perStream < n;) {
      const requests: StreamAppend[] = [];
      for (let k = 0; k < 100 && s * perStream < n; k++, s++) {
        const events = Array.from({ length: Math.min(perStream, n - s * perStream) }, (_, v) => ({
          type: 'instance.spawned',
          data: { pid: v, host: '127.0.0.1', port: 41000 + v },
          at: at(v),
        }));
        requests.push({ stream: `instance-bench_${s}`, events, expectedVersion: 'no-stream' });
      }
      await store.appendMany(requests);
    }
  } finally {
    await store.close();
  }
}

// The raw replay: the file line by line, each event parsed and folded through the same compiled machine.
const RAW_REPLAY = `
const { createReadStream, writeSync } = require('node:fs');
const { createInterface } = require('node:readline');
(async () => {
  const { machines, initialSnapshot, step, stateName } = await import(process.argv[2]);
  let machine;
  let snapshot;
  let n = 0;
  for await (const line of createInterface({ input: createReadStream(process.argv[1]), crlfDelay: Infinity })) {
    const e = JSON.parse(line);
    if (n++ === 0) {
      machine = machines[e.kind];
      snapshot = initialSnapshot(machine);
      continue;
    }
    const from = stateName(snapshot);
    const r = step(machine, snapshot, { type: e.type, at: e.at, data: e.data });
    snapshot = r.snapshot;
    writeSync(1, 'v' + e.version + ' ' + e.at + '  ' + e.type + ' ' + from + ' → ' + stateName(snapshot) + '\\n');
  }
})();
`;

// The raw events: better-sqlite3 iterate() over the whole log, each row printed as runlog events --json prints it.
const RAW_EVENTS = `
const Database = require('better-sqlite3');
const { writeSync } = require('node:fs');
const db = new Database(process.argv[1], { readonly: true });
for (const r of db.prepare('SELECT * FROM events ORDER BY seq').iterate()) {
  writeSync(1, JSON.stringify({ seq: r.seq, stream: r.stream, version: r.version, type: r.type, schema: r.schema,
    data: JSON.parse(r.data), meta: JSON.parse(r.meta), at: r.at }) + '\\n');
}
`;

export const cliMemoryBenches: Bench[] = [
  {
    name: 'cli.replay-file.rss',
    needs: 'the compiled CLI (npm run build)',
    async run(opts) {
      requireBuild();
      const n = size(opts, 'RUNLOG_BENCH_REPLAY_EVENTS', 100_000, 2_000);
      const dir = mkdtempSync(join(tmpdir(), 'runlog-bench-cli-memory-'));
      try {
        const file = join(dir, 'history.jsonl');
        opts.log(`writing a history of ${n} events…`);
        await writeHistory(file, n);
        const ours = peakRssMb([BIN, 'replay', '--file', file]);
        const raw = peakRssMb(['-e', RAW_REPLAY, file, join(REPO, 'dist/machines/runtime.js')]);
        return result('cli.replay-file.rss', ours, raw, { events: n });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  },
  {
    name: 'cli.events-all.rss',
    needs: 'the compiled CLI (npm run build)',
    async run(opts) {
      requireBuild();
      const n = size(opts, 'RUNLOG_BENCH_EVENTS_ALL', 1_000_000, 20_000);
      const dir = mkdtempSync(join(tmpdir(), 'runlog-bench-cli-memory-'));
      try {
        const db = join(dir, 'runlog.db');
        opts.log(`writing a log of ${n} events…`);
        await writeEvents(db, n);
        const ours = peakRssMb([BIN, 'events', '--all', '--json', '--db', db]);
        const raw = peakRssMb(['-e', RAW_EVENTS, db]);
        return result('cli.events-all.rss', ours, raw, { events: n });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  },
];
