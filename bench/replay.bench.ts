// `replay.deep` (issue 15): `runlog replay <id> --to <v>` on an actor with 100,000 events, in process (the CLI's
// main with its output discarded: open the log read-only, resolve the id, restore the newest snapshot at or before v,
// fold the events after it, print the state there). Baseline: better-sqlite3 opening the same file and reading
// the rows of that actor up to v raw — what a replay from the first event would have to read before folding any.
// The log (one actor, 100,000 events, a snapshot every 100 as the supervisor writes them) is generated once into
// bench/.cache/ (gitignored); a smoke run (harness.ts `sizes`) writes a log of 1,000 events into a temporary directory.
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeSnapshot, SNAPSHOT_EVERY } from '../src/inspect/snapshots.ts';
import { main } from '../src/cli/main.ts';
import type { Io } from '../src/cli/output.ts';
import { toMachineEvent, type NewEvent, type RecordedEvent } from '../src/domain/events.ts';
import { actorStatus, summarize } from '../src/machines/summary.ts';
import { initialSnapshot, machines, replay, stateName } from '../src/machines/runtime.ts';
import { LATEST_SCHEMA } from '../src/store/sqlite/schema.ts';
import { SqlitePortStore } from '../src/store/sqlite/port-adapter.ts';
import { median, nowMs, sideBySide, sizes, type Bench } from './harness.ts';

const CACHE = join(import.meta.dirname, '.cache');
const ID = 'inst_deep';
const STREAM = `instance-${ID}`;
const spec = {
  instanceId: ID,
  appId: 'com.example.hello',
  appDir: '/a',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 5, backoffMs: 1000, maxBackoffMs: 60000, resetAfterMs: 600000 },
};
const at = (i: number) => new Date(Date.parse('2026-01-01T00:00:00.000Z') + i * 1000).toISOString();

/** A running instance that has its tools granted and revoked 100,000 times, written as the host would. */
function event(v: number): NewEvent {
  if (v === 1) return { type: 'instance.requested', at: at(v), data: { spec } };
  if (v === 2)
    return {
      type: 'instance.spawned',
      at: at(v),
      data: { pid: 4242, host: '127.0.0.1', port: 4100, containerId: null },
    };
  if (v === 3) return { type: 'instance.healthy', at: at(v), data: { identity: 'match' } };
  if (v === 4) return { type: 'instance.running', at: at(v), data: {} };
  return {
    type: v % 2 ? 'instance.tool-revoked' : 'instance.tool-granted',
    at: at(v),
    data: { tool: `tool-${v % 13}` },
  };
}

async function generate(file: string, EVENTS: number, log: (m: string) => void): Promise<void> {
  const tmp = `${file}.partial`;
  rmSync(tmp, { force: true });
  const store = new SqlitePortStore(tmp, { synchronous: 'NORMAL' });
  const machine = machines.instance;
  let snapshot = initialSnapshot(machine);
  for (let v = 1; v <= EVENTS; v += SNAPSHOT_EVERY) {
    const events = Array.from({ length: SNAPSHOT_EVERY }, (_, i) => event(v + i));
    snapshot = replay(
      machine,
      events.map((e) => toMachineEvent(e as Pick<RecordedEvent, 'type' | 'at' | 'data'>)),
      snapshot,
    );
    const version = v + SNAPSHOT_EVERY - 1;
    const projection = {
      id: ID,
      kind: 'instance',
      stream: STREAM,
      state: stateName(snapshot),
      status: actorStatus(snapshot),
      version,
      createdAt: at(1),
      updatedAt: at(version),
      summary: summarize('instance', snapshot),
    };
    await store.appendToStream(STREAM, events, {
      expectedVersion: v - 1,
      row: projection,
      snapshot: encodeSnapshot(machine, STREAM, version, at(version), snapshot),
    });
    if (v % 20_000 === 1) log(`generating ${file}: ${v - 1}/${EVENTS} events`);
  }
  await store.close();
  renameSync(tmp, file);
  rmSync(`${tmp}-shutdown`, { force: true });
}

const quiet = (json: boolean): Io => ({ out: () => undefined, err: () => undefined, json });

export const replayBenches: Bench[] = [
  {
    name: 'replay.deep',
    async run(opts) {
      const { rounds, log } = opts;
      const { EVENTS } = sizes(opts, { full: { EVENTS: 100_000 }, smoke: { EVENTS: 1_000 } });
      const TO = EVENTS - 37; // a version between two snapshots: 63 events after the one at or before it
      const dir = opts.smoke ? mkdtempSync(join(tmpdir(), 'runlog-bench-replay-')) : CACHE;
      mkdirSync(dir, { recursive: true });
      const db = join(dir, `replay-deep-${EVENTS}-v${LATEST_SCHEMA}.db`);
      try {
        if (!existsSync(db)) await generate(db, EVENTS, log);
        return await deep(db, EVENTS, TO, rounds);
      } finally {
        if (opts.smoke) rmSync(dir, { recursive: true, force: true });
      }
    },
  },
];

/** Times `runlog replay <id> --to TO` on `db` beside the raw read of the same rows. */
async function deep(db: string, EVENTS: number, TO: number, rounds: number) {
  // What it answers is checked against a full fold once, outside the timing.
  let answer = '';
  const code = await main(['replay', ID, '--to', String(TO), '--db', db, '--json'], (json) => ({
    ...quiet(json),
    out: (t) => (answer += t),
  }));
  const view = JSON.parse(answer) as { from?: number; to: number; steps: unknown[] };
  if (code !== 0 || view.to !== TO || view.from !== Math.floor(TO / SNAPSHOT_EVERY) * SNAPSHOT_EVERY)
    throw new Error(`replay --to ${TO} answered ${answer.slice(0, 200)}`);
  const ours: number[] = [];
  const raw: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let t0 = nowMs();
    await main(['replay', ID, '--to', String(TO), '--db', db, '--json'], quiet);
    ours.push(nowMs() - t0);
    t0 = nowMs();
    const d = new Database(db, { readonly: true });
    const rows = d
      .prepare('SELECT * FROM events WHERE stream = ? AND version <= ? ORDER BY version')
      .all(STREAM, TO).length;
    d.close();
    raw.push(nowMs() - t0);
    if (rows !== TO) throw new Error(`raw read ${rows} rows`);
  }
  const v = median(ours);
  const b = median(raw);
  return sideBySide('replay.deep', 'ms', v, b, {
    events: EVENTS,
    to: TO,
    foldedFromSnapshot: view.steps.length,
    target: '≤ 200 ms',
  });
}
