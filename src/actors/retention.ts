// Retention policy around the store's archive (store/sqlite-archive.ts): what `--before` and `--retain` mean, where
// an archive goes by default, and the schedule `runlog serve --retain <duration>` runs it on.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { RunlogError, UsageError } from '../domain/errors.ts';
import { archiveEnded, type ArchiveResult, type ArchiveStep } from '../store/sqlite-archive.ts';
import { SqliteEventStore } from '../store/sqlite-event-store.ts';

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };

/** A duration such as `30d`, `12h`, `90m`, `2w`, `45s`, in ms; null when the text is not one. */
export function parseDuration(text: string): number | null {
  const m = /^(\d+)([smhdw])$/.exec(text.trim());
  return m ? Number(m[1]) * UNITS[m[2]!]! : null;
}

/** `--before`: an ISO date or time (`2026-11-01`, `2026-11-01T12:00:00Z`), or a duration back from now (`30d`). */
export function parseBefore(text: string, now: string): string {
  const ms = parseDuration(text);
  if (ms !== null) return new Date(Date.parse(now) - ms).toISOString();
  if (/^\d{4}-\d{2}-\d{2}/.test(text) && !Number.isNaN(Date.parse(text))) return new Date(Date.parse(text)).toISOString();
  throw new UsageError(`--before must be a date (2026-11-01, 2026-11-01T12:00:00Z) or a duration back from now (30d, 12h, 90m, 2w), not '${text}'`);
}

/** `<home>/archives/runlog-<time>.jsonl.gz` (the directory created 0700). */
export function defaultArchiveFile(home: string, now: string): string {
  const dir = join(home, 'archives');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return join(dir, `runlog-${now.replace(/[:.]/g, '-')}.jsonl.gz`);
}

export interface ArchiveRunOptions {
  before: string;
  out?: string;
  home: string;
  now?: () => string;
  onStep?: (step: ArchiveStep) => void;
}

/** One archive run: the events of actors that ended before `before` move to `out` (default under `<home>/archives`). */
export function archiveLog(store: SqliteEventStore, options: ArchiveRunOptions): ArchiveResult {
  const now = options.now ?? (() => new Date().toISOString());
  const out = options.out ? resolve(options.out) : defaultArchiveFile(options.home, now());
  return archiveEnded(store, { before: options.before, out, now, ...(options.onStep ? { onStep: options.onStep } : {}) });
}

export interface RetentionPolicy {
  /** Actors that ended longer ago than this are archived. */
  retainMs: number;
  /** How often the policy runs (default: every hour, and once at start). */
  everyMs?: number;
}

/** `--retain <duration>`: how long ended actors stay in the log. */
export function parseRetain(text: string): number {
  const ms = parseDuration(text);
  if (ms === null || ms <= 0) throw new UsageError(`--retain must be a duration (30d, 12h, 2w), not '${text}'`);
  return ms;
}

/** The policy on a supervisor's log: SQLite only for now (PostgreSQL: NOT_SUPPORTED). */
export function startRetentionOn(store: unknown, home: string, policy: RetentionPolicy, log: (message: string) => void): () => void {
  if (!(store instanceof SqliteEventStore)) throw new RunlogError('NOT_SUPPORTED', 'retention (runlog archive, --retain) works on a SQLite log; the PostgreSQL store has no archive yet');
  return startRetention(store, home, policy, log);
}

/**
 * Runs the policy once now and then every `everyMs` in this process (`runlog serve --retain`). A run is synchronous:
 * it holds the supervisor's loop while it writes the archive and removes the events. A failed run is logged and
 * changes nothing (sqlite-archive.ts); the next one tries again.
 */
export function startRetention(store: SqliteEventStore, home: string, policy: RetentionPolicy, log: (message: string, result?: ArchiveResult) => void, now: () => string = () => new Date().toISOString()): () => void {
  const run = (): void => {
    try {
      const before = new Date(Date.parse(now()) - policy.retainMs).toISOString();
      const r = archiveLog(store, { before, home, now });
      if (r.file) log(`retention: archived ${r.actors} actors (${r.events} events) that ended before ${before} to ${r.file}; log ${r.sizeBefore} → ${r.sizeAfter} bytes`, r);
    } catch (err) {
      log(`retention: archive run failed, nothing removed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const first = setTimeout(run, 0);
  const timer = setInterval(run, policy.everyMs ?? 3_600_000);
  first.unref();
  timer.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}
