// `runlog verify`: everything that can tell a damaged log from a sound one, checked read-only, reporting every
// kind of damage found with its own code and the first bad position. The log itself: SQLite's header and
// length, its clean-shutdown record, the WAL's frames, SQLite's integrity check. The history: the hash chain
// over every event. What is derived from it: the actors projection and the snapshots (the newest per actor and
// the older ones `replay --to` reads), each against a fold of the events, which stay the only truth. On
// PostgreSQL (verifyPgLog) the same, less what is SQLite's own (file header, WAL, integrity check).
//
// The checks of the history and of what is derived from it (verifyStore) read the log through the port, a page at
// a time, and the chain through ChainVerifying: they hold one fold per actor, never the log. What each store keeps
// beside the port (its snapshot tables, its archives' records) is handed over as a VerifySource by the two entry
// points, which open the store.
import { RunlogError, StoreCorruptError } from '../domain/errors.ts';
import { machines, stateName } from '../machines/runtime.ts';
import { actorStatus } from '../machines/summary.ts';
import type { Auditing, ChainVerifying } from '../store/capabilities.ts';
import type { ChainCheck } from '../store/chain.ts';
import type { EventStorePort, SnapshotRecord } from '../store/port.ts';
import { walDamage } from '../store/sqlite/file-checks.ts';
import { foldLog, type FoldedStream } from './inspection.ts';
import { kindOf, snapshotProblem, snapshotState } from './snapshots.ts';

export interface VerifyFinding {
  code: string;
  /** damage: the log (or something derived from it) is wrong; warning: worth knowing, changes no answer. */
  severity: 'damage' | 'warning';
  message: string;
  /** The first bad position, when the finding has one. */
  seq?: number;
  stream?: string;
  version?: number;
}

export interface VerifyReport {
  file: string;
  ok: boolean;
  events: number;
  /** Where the chain ends (when it could be checked to its end). */
  lastSeq: number | null;
  lastHash: string | null;
  actors: number;
  /** Snapshots checked against the fold (usable ones); stale ones are counted in the findings. */
  snapshots: number;
  /** Older snapshots (snapshot_history, read by replay --to) checked against the fold. */
  olderSnapshots: number;
  /** Archive files (runlog archive) read and checked against their chain and the log's record of them. */
  archives: number;
  findings: VerifyFinding[];
}

function finding(err: RunlogError): VerifyFinding {
  const d = err.details ?? {};
  return {
    code: err.code,
    severity: 'damage',
    message: err.message,
    ...(typeof d.seq === 'number' ? { seq: d.seq } : {}),
    ...(typeof d.lastGoodSeq === 'number' ? { seq: d.lastGoodSeq } : {}),
  };
}

function chainFinding(report: VerifyReport, chain: ChainCheck): void {
  report.events = chain.events;
  if (chain.ok) {
    report.lastSeq = chain.lastSeq;
    report.lastHash = chain.lastHash.toString('hex');
    return;
  }
  report.findings.push({
    code: 'STORE_CHAIN_BROKEN',
    severity: 'damage',
    message: `hash chain broken at seq ${chain.seq}${chain.stream ? ` (${chain.stream} v${chain.version})` : ''}: ${chain.reason}`,
    seq: chain.seq,
    ...(chain.stream ? { stream: chain.stream } : {}),
    ...(chain.version !== null ? { version: chain.version } : {}),
  });
}

/** What verify reads of a store: the log through the port, its chain, and what the store keeps beside the port. */
export interface VerifySource {
  store: EventStorePort;
  chain: ChainVerifying;
  audit: Auditing;
}

/** The derived checks' input: the log (folded) and the snapshots, already read. */
interface DerivedSource {
  log: EventStorePort;
  /** The newest snapshot per actor. */
  snapshots: Iterable<SnapshotRecord> | AsyncIterable<SnapshotRecord>;
  /** The older ones. */
  history: Iterable<SnapshotRecord> | AsyncIterable<SnapshotRecord>;
  snapshotVersions: Map<string, number>;
}

/** A snapshot's problem as a finding (a stale one is a warning), or null when it is usable. */
function snapshotFinding(r: SnapshotRecord, older: boolean): VerifyFinding | null {
  const kind = kindOf(r.stream, machines);
  const problem = kind
    ? snapshotProblem(machines[kind], r)
    : { code: 'SNAPSHOT_CHECKSUM' as const, reason: 'it belongs to no actor kind' };
  if (!problem) return null;
  const what = older ? 'older snapshot' : 'snapshot';
  if (problem.code === 'SNAPSHOT_STALE') {
    return {
      code: problem.code,
      severity: 'warning',
      message: `${r.stream} v${r.version}: ${what} ignored, ${problem.reason}; runlog rebuild --snapshots makes new ones`,
      stream: r.stream,
      version: r.version,
    };
  }
  return {
    code: problem.code,
    severity: 'damage',
    message: `${r.stream} v${r.version}: ${what} ignored, ${problem.reason}`,
    stream: r.stream,
    version: r.version,
  };
}

/** JSON text with every object's keys sorted: the same value however its keys were ordered. */
function canonical(text: string): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (v === null || typeof v !== 'object') return v;
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
    );
  };
  return JSON.stringify(sort(JSON.parse(text)));
}

/**
 * Whether a stored snapshot holds the fold's state. Compared as values, not text: PostgreSQL stores event data as
 * jsonb, whose keys come back in its own order, so a fold of events read back orders an object's keys
 * differently from the one the host folded when it wrote the snapshot (the same state).
 */
function sameState(stored: string, folded: string): boolean {
  if (stored === folded) return true;
  try {
    return canonical(stored) === canonical(folded);
  } catch {
    return false;
  }
}

/** The snapshots (newest and older) and the actors projection, each against one fold of the events. */
async function checkDerived(report: VerifyReport, src: DerivedSource): Promise<void> {
  // Snapshots: each sound and of this machine, else said why (a cache: a bad one is ignored, never used).
  const snapshots = new Map<string, SnapshotRecord>();
  const stored = new Set<string>();
  for await (const r of src.snapshots) {
    stored.add(`${r.stream}@${r.version}`);
    const f = snapshotFinding(r, false);
    if (f) report.findings.push(f);
    else snapshots.set(r.stream, r);
  }
  // Older snapshots: stream → version → record (only usable ones are compared with the fold).
  const history = new Map<string, Map<number, SnapshotRecord>>();
  let olderCount = 0;
  for await (const r of src.history) {
    const f = snapshotFinding(r, true);
    if (f) {
      report.findings.push(f);
      continue;
    }
    let m = history.get(r.stream);
    if (!m) history.set(r.stream, (m = new Map()));
    m.set(r.version, r);
    olderCount += 1;
  }
  for (const [stream, version] of src.snapshotVersions) {
    if (!stored.has(`${stream}@${version}`)) {
      report.findings.push({
        code: 'SNAPSHOT_MISSING',
        severity: 'damage',
        message:
          `${stream}: its snapshot at v${version} is gone (the actors projection records it); ` +
          'it is folded from its events meanwhile',
        stream,
        version,
      });
    }
  }
  const matched = new Set<string>();
  let olderMatched = 0;
  const mismatch = (stream: string, version: number, older: boolean): void => {
    report.findings.push({
      code: 'SNAPSHOT_MISMATCH',
      severity: 'damage',
      message:
        `${stream} v${version}: the ${older ? 'older snapshot (replay --to reads it)' : 'snapshot'} ` +
        'differs from the fold of its events',
      stream,
      version,
    });
  };
  const visit = (stream: string, f: FoldedStream): void => {
    const r = snapshots.get(stream);
    if (r && r.version === f.version) {
      matched.add(stream);
      if (!sameState(r.state, snapshotState(machines[f.kind], f.snapshot))) mismatch(stream, r.version, false);
    }
    const h = history.get(stream)?.get(f.version);
    if (h) {
      olderMatched += 1;
      history.get(stream)!.delete(f.version);
      if (!sameState(h.state, snapshotState(machines[f.kind], f.snapshot))) mismatch(stream, h.version, true);
    }
  };

  // The projection against a fold of the events (what `runlog rebuild` would write).
  const folded = await foldLog(src.log, snapshots.size > 0 || olderCount > 0 ? visit : undefined);
  report.snapshots = matched.size;
  report.olderSnapshots = olderMatched;
  for (const [stream, r] of snapshots) {
    if (!matched.has(stream))
      report.findings.push({
        code: 'SNAPSHOT_MISMATCH',
        severity: 'damage',
        message: `${stream} v${r.version}: the snapshot stands at a version its events never reached`,
        stream,
        version: r.version,
      });
  }
  for (const [stream, left] of history) {
    for (const r of left.values()) {
      report.findings.push({
        code: 'SNAPSHOT_MISMATCH',
        severity: 'damage',
        message: `${stream} v${r.version}: an older snapshot stands at a version its events never reached`,
        stream,
        version: r.version,
      });
    }
  }
  const rows = new Map((await src.log.listActors({ all: true })).map((r) => [r.stream, r]));
  report.actors = folded.streams.size;
  for (const [stream, f] of folded.streams) {
    const row = rows.get(stream);
    rows.delete(stream);
    const want = { state: stateName(f.snapshot), status: actorStatus(f.snapshot), version: f.version };
    if (!row) {
      report.findings.push({
        code: 'PROJECTION_MISMATCH',
        severity: 'damage',
        message:
          `${stream}: no row in the actors projection (its events say ${want.state} at v${want.version}); ` +
          'runlog rebuild recomputes it',
        stream,
      });
    } else if (row.state !== want.state || row.status !== want.status || row.version !== want.version) {
      report.findings.push({
        code: 'PROJECTION_MISMATCH',
        severity: 'damage',
        message:
          `${stream}: the actors projection says ${row.state} (${row.status}) at v${row.version}, ` +
          `its events say ${want.state} (${want.status}) at v${want.version}; runlog rebuild recomputes it`,
        stream,
        version: want.version,
      });
    }
  }
  for (const [stream, row] of rows) {
    if (row.archived) continue; // a tombstone: its events are in an archive (runlog archive), the chain records the hole
    report.findings.push({
      code: 'PROJECTION_MISMATCH',
      severity: 'damage',
      message: `${stream}: a row in the actors projection with no events; runlog rebuild recomputes it`,
      stream,
    });
  }
}

const emptyReport = (file: string): VerifyReport => ({
  file,
  ok: true,
  events: 0,
  lastSeq: null,
  lastHash: null,
  actors: 0,
  snapshots: 0,
  olderSnapshots: 0,
  archives: 0,
  findings: [],
});

/**
 * The checks every store shares, added to `report`: the hash chain, the archives, then the snapshots and the
 * actors projection against one fold of the events (read a page at a time).
 */
export async function verifyStore(
  report: VerifyReport,
  src: VerifySource,
  options: { archiveDirs?: readonly string[] } = {},
): Promise<VerifyReport> {
  chainFinding(report, await src.chain.verifyChain());
  const archives = await src.audit.checkArchives(options.archiveDirs ?? []);
  report.archives = archives.checked;
  for (const { file: _file, ...f } of archives.findings) report.findings.push(f);
  await checkDerived(report, {
    log: src.store,
    snapshots: src.audit.snapshots(),
    history: src.audit.olderSnapshots(),
    snapshotVersions: await src.audit.snapshotVersions(),
  });
  report.ok = report.findings.every((f) => f.severity !== 'damage');
  return report;
}

/** `runlog verify` on a SQLite file. `archiveDirs`: where to look for archives moved from where they were written (by their file name). */
export async function verifyLog(
  file: string,
  options: { archiveDirs?: readonly string[] } = {},
): Promise<VerifyReport> {
  const report = emptyReport(file);
  const wal = walDamage(file);
  if (wal) report.findings.push(finding(wal));
  const { SqlitePortStore } = await import('../store/sqlite/port-adapter.ts');
  let log: InstanceType<typeof SqlitePortStore>;
  try {
    log = new SqlitePortStore(file, { readOnly: true });
  } catch (err) {
    if (!(err instanceof RunlogError)) throw err;
    if (err.code === 'LOG_MISSING' || err.code === 'LOG_UNREADABLE') throw err; // nothing to verify: an error, not a finding
    report.findings.push(finding(err));
    report.ok = false;
    return report;
  }
  try {
    // SQLite's own checks go to the engine under the port; the rest through the port and its capabilities.
    const engine = log.store;
    const problems = engine.integrityCheck();
    if (problems.length > 0)
      report.findings.push(finding(new StoreCorruptError(file, `integrity_check: ${problems.slice(0, 5).join('; ')}`)));
    return await verifyStore(
      report,
      {
        store: log,
        chain: log,
        audit: log,
      },
      options,
    );
  } finally {
    await log.close();
  }
}

/**
 * `runlog verify --store postgres://…`: the hash chain (postgres/schema.ts migration 4), the snapshots and the actors
 * projection, and the archives its retention wrote (postgres/archive-check.ts; `archiveDirs` as for SQLite). A
 * deleted snapshot is reported (SNAPSHOT_MISSING) against snapshot_versions, as SQLite's against
 * actors.snapshot_version.
 */
export async function verifyPgLog(
  url: string,
  options: { archiveDirs?: readonly string[] } = {},
): Promise<VerifyReport> {
  const { openPostgresLog } = await import('../store/postgres/open.ts');
  const { log: store, audit } = await openPostgresLog({ url, pollMs: 0, maxConnections: 2 });
  try {
    return await verifyStore(emptyReport(store.description), { store, chain: store, audit }, options);
  } finally {
    await store.close();
  }
}
