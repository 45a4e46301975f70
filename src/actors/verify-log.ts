// `runlog verify`: everything that can tell a damaged log from a sound one, checked read-only, reporting every
// kind of damage found with its own code and the first bad position. The log itself: SQLite's header and
// length, its clean-shutdown record, the WAL's frames, SQLite's integrity check. The history: the hash chain
// over every event. What is derived from it: the actors projection (and, where there are any, the snapshots),
// each against a fold of the events, which stay the only truth.
import { RunlogError, StoreCorruptError } from '../domain/errors.ts';
import { machines, stateName } from '../machines/runtime.ts';
import { actorStatus } from '../machines/summary.ts';
import { SqliteEventStore, walDamage } from '../store/sqlite-event-store.ts';
import type { SnapshotRecord } from '../store/event-store.ts';
import { foldLog } from './inspection.ts';
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

export function verifyLog(file: string): VerifyReport {
  const report: VerifyReport = { file, ok: true, events: 0, lastSeq: null, lastHash: null, actors: 0, snapshots: 0, findings: [] };
  const wal = walDamage(file);
  if (wal) report.findings.push(finding(wal));
  let store: SqliteEventStore;
  try {
    store = new SqliteEventStore(file, { readOnly: true });
  } catch (err) {
    if (!(err instanceof RunlogError)) throw err;
    if (err.code === 'LOG_MISSING' || err.code === 'LOG_UNREADABLE') throw err; // nothing to verify: an error, not a finding
    report.findings.push(finding(err));
    report.ok = false;
    return report;
  }
  try {
    const problems = store.integrityCheck();
    if (problems.length > 0) report.findings.push(finding(new StoreCorruptError(file, `integrity_check: ${problems.slice(0, 5).join('; ')}`)));

    const chain = store.verifyChain();
    if (chain.ok) {
      report.events = chain.events;
      report.lastSeq = chain.lastSeq;
      report.lastHash = chain.lastHash.toString('hex');
    } else {
      report.events = chain.events;
      report.findings.push({
        code: 'STORE_CHAIN_BROKEN',
        severity: 'damage',
        message: `hash chain broken at seq ${chain.seq}${chain.stream ? ` (${chain.stream} v${chain.version})` : ''}: ${chain.reason}`,
        seq: chain.seq,
        ...(chain.stream ? { stream: chain.stream } : {}),
        ...(chain.version !== null ? { version: chain.version } : {}),
      });
    }

    // Snapshots: each sound and of this machine, else said why (a cache: a bad one is ignored, never used).
    const snapshots = new Map<string, SnapshotRecord>();
    const stored = new Set<string>();
    for (const r of store.iterateSnapshots()) {
      stored.add(`${r.stream}@${r.version}`);
      const kind = kindOf(r.stream, machines);
      const problem = kind ? snapshotProblem(machines[kind], r) : { code: 'SNAPSHOT_CHECKSUM' as const, reason: 'it belongs to no actor kind' };
      if (!problem) snapshots.set(r.stream, r);
      else if (problem.code === 'SNAPSHOT_STALE') {
        report.findings.push({ code: problem.code, severity: 'warning', message: `${r.stream} v${r.version}: snapshot ignored, ${problem.reason}; runlog rebuild --snapshots makes new ones`, stream: r.stream, version: r.version });
      } else {
        report.findings.push({ code: problem.code, severity: 'damage', message: `${r.stream} v${r.version}: snapshot ignored, ${problem.reason}`, stream: r.stream, version: r.version });
      }
    }
    for (const [stream, version] of store.snapshotVersions()) {
      if (!stored.has(`${stream}@${version}`)) {
        report.findings.push({ code: 'SNAPSHOT_MISSING', severity: 'damage', message: `${stream}: its snapshot at v${version} is gone (the actors projection records it); it is folded from its events meanwhile`, stream, version });
      }
    }
    const matched = new Set<string>();
    const visit = (stream: string, f: { kind: keyof typeof machines; snapshot: Parameters<typeof snapshotState>[1]; version: number }): void => {
      const r = snapshots.get(stream);
      if (!r || r.version !== f.version) return;
      matched.add(stream);
      if (snapshotState(machines[f.kind], f.snapshot) !== r.state) {
        report.findings.push({ code: 'SNAPSHOT_MISMATCH', severity: 'damage', message: `${stream} v${r.version}: the snapshot differs from the fold of its events`, stream, version: r.version });
      }
    };

    // The projection against a fold of the events (what `runlog rebuild` would write).
    const folded = foldLog(store, snapshots.size > 0 ? visit : undefined);
    report.snapshots = matched.size;
    for (const [stream, r] of snapshots) {
      if (!matched.has(stream)) report.findings.push({ code: 'SNAPSHOT_MISMATCH', severity: 'damage', message: `${stream} v${r.version}: the snapshot stands at a version its events never reached`, stream, version: r.version });
    }
    const rows = new Map(store.listActors({ all: true }).map((r) => [r.stream, r]));
    report.actors = folded.streams.size;
    for (const [stream, f] of folded.streams) {
      const row = rows.get(stream);
      rows.delete(stream);
      const want = { state: stateName(f.snapshot), status: actorStatus(f.snapshot), version: f.version };
      if (!row) {
        report.findings.push({ code: 'PROJECTION_MISMATCH', severity: 'damage', message: `${stream}: no row in the actors projection (its events say ${want.state} at v${want.version}); runlog rebuild recomputes it`, stream });
      } else if (row.state !== want.state || row.status !== want.status || row.version !== want.version) {
        report.findings.push({
          code: 'PROJECTION_MISMATCH',
          severity: 'damage',
          message: `${stream}: the actors projection says ${row.state} (${row.status}) at v${row.version}, its events say ${want.state} (${want.status}) at v${want.version}; runlog rebuild recomputes it`,
          stream,
          version: want.version,
        });
      }
    }
    for (const [stream, row] of rows) {
      if (row.archived) continue; // a tombstone: its events are in an archive (runlog archive), the chain records the hole
      report.findings.push({ code: 'PROJECTION_MISMATCH', severity: 'damage', message: `${stream}: a row in the actors projection with no events; runlog rebuild recomputes it`, stream });
    }
  } finally {
    store.close();
  }
  report.ok = report.findings.every((f) => f.severity !== 'damage');
  return report;
}
