// Data on stdout, logs on stderr. --json prints one JSON document with stable keys.
import { RunlogError } from '../domain/errors.ts';

export interface Io {
  out(text: string): void;
  err(text: string): void;
  json: boolean;
}

export const EXIT = { ok: 0, failure: 1, error: 2 } as const;

export const processIo = (json: boolean): Io => ({
  out: (t) => process.stdout.write(t.endsWith('\n') ? t : `${t}\n`),
  err: (t) => process.stderr.write(t.endsWith('\n') ? t : `${t}\n`),
  json,
});

export function printJson(io: Io, value: unknown): void {
  io.out(JSON.stringify(value, null, 2));
}

/** A plain-text table: columns padded to their widest cell. */
export function table(rows: string[][], header: string[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

export function age(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export function truncate(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

/** Errors become one line on stderr (or a JSON error on stdout with --json) and an exit code. */
export function reportError(io: Io, err: unknown): number {
  const notFound = err instanceof RunlogError && err.code === 'NOT_FOUND';
  if (io.json) {
    const body = err instanceof RunlogError ? err.toJSON() : { code: 'INTERNAL', message: err instanceof Error ? err.message : String(err) };
    io.out(JSON.stringify({ error: body }, null, 2));
  } else {
    const code = err instanceof RunlogError ? err.code : 'INTERNAL';
    io.err(`runlog: ${code}: ${err instanceof Error ? err.message : String(err)}`);
    if (!(err instanceof RunlogError) && err instanceof Error && process.env.RUNLOG_DEBUG) io.err(err.stack ?? '');
  }
  return notFound ? EXIT.failure : EXIT.error;
}
