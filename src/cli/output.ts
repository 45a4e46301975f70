// Data on stdout, logs on stderr. --json prints JSON with stable keys (errors: one JSON object on stderr).
// This module stays light: every command loads it, including `ps`, which must start fast.
import { EXIT, exitStatusOf } from '../domain/error-codes.ts';
import { RunlogError, ValidationError } from '../domain/errors.ts';

export interface Io {
  out(text: string): void;
  err(text: string): void;
  json: boolean;
  /**
   * True once stdout's reader has gone away (`runlog … | head -1`): commands that stream stop producing
   * output and end quietly with status 0. Absent in test doubles (their output never closes).
   */
  readonly closed?: boolean;
  /** Calls `cb` once when stdout's reader goes away (the demo treats it as a request to shut down). */
  onClosed?(cb: () => void): () => void;
  /**
   * Back-pressure for commands that print a lot: undefined while stdout takes more, else a promise that resolves
   * once it has drained (or its reader went away). A slow reader slows the command; nothing piles up in memory.
   */
  room?(): Promise<void> | undefined;
}

/** Prints a line and waits while stdout is full: memory stays bounded whatever reads (or stops reading) it. */
export async function outPaced(io: Io, text: string): Promise<void> {
  io.out(text);
  const wait = io.room?.();
  if (wait) await wait;
}

/**
 * Prints a line per row as the rows are read (`line`, then `each` once it is out), pacing to the reader. False when
 * the reader went away first (`| head -1`): the command then ends quietly.
 */
export async function printEach<T>(
  io: Io,
  rows: Iterable<T> | AsyncIterable<T>,
  line: (row: T) => string,
  each?: (row: T) => void,
): Promise<boolean> {
  // A synchronous iterable (a log on this machine) is walked without an await per row it does not need.
  if (Symbol.asyncIterator in rows) {
    for await (const row of rows) {
      if (io.closed) return false;
      await outPaced(io, line(row));
      each?.(row);
    }
    return true;
  }
  for (const row of rows) {
    if (io.closed) return false;
    await outPaced(io, line(row));
    each?.(row);
  }
  return true;
}

/**
 * Exit codes, stable for scripts (README, "The CLI"), defined with the error codes (src/domain/error-codes.ts):
 * 0 ok · 1 failure found, not found, or another failure · 2 usage (the command line or its input is wrong) ·
 * 3 no supervisor · 4 damaged or foreign log (or history file) · 5 conflict with the actor's state.
 */
export { EXIT };

/** An error's exit status: its code's category (also for errors the API sent back); anything else is a failure. */
export function exitCodeFor(err: unknown): number {
  return err instanceof RunlogError ? exitStatusOf(err.code) : EXIT.failure;
}

/** Bytes to stdout/stderr that never throw: a reader that went away (EPIPE) turns output off instead of crashing. */
export function processIo(json: boolean): Io {
  const state = watchStreams();
  return {
    out: (t) => {
      if (state.outGone || process.stdout.destroyed) return state.goneOut();
      process.stdout.write(t.endsWith('\n') ? t : `${t}\n`);
      if (process.stdout.destroyed) state.goneOut(); // a synchronous pipe write that failed destroys the stream at once
    },
    err: (t) => {
      if (state.errGone || process.stderr.destroyed) return;
      process.stderr.write(t.endsWith('\n') ? t : `${t}\n`);
    },
    json,
    get closed() {
      return state.outGone || process.stdout.destroyed;
    },
    room: () => {
      const out = process.stdout;
      if (state.outGone || out.destroyed || !out.writableNeedDrain) return undefined;
      return new Promise<void>((resolve) => {
        const done = () => {
          out.off('drain', done);
          out.off('close', done);
          out.off('error', done);
          resolve();
        };
        out.on('drain', done);
        out.on('close', done);
        out.on('error', done);
      });
    },
    onClosed: (cb) => {
      if (state.outGone) {
        queueMicrotask(cb);
        return () => undefined;
      }
      state.listeners.add(cb);
      return () => state.listeners.delete(cb);
    },
  };
}

interface StreamState {
  outGone: boolean;
  errGone: boolean;
  listeners: Set<() => void>;
  goneOut(): void;
}

let streams: StreamState | undefined;

/** Installs (once per process) the error handlers that keep a closed pipe from becoming an uncaught exception. */
function watchStreams(): StreamState {
  if (streams) return streams;
  const s: StreamState = {
    outGone: false,
    errGone: false,
    listeners: new Set(),
    goneOut() {
      if (s.outGone) return;
      s.outGone = true;
      for (const cb of [...s.listeners]) cb();
      s.listeners.clear();
    },
  };
  // Any error writing stdout (EPIPE, EIO) means nobody reads it any more: stop writing, do not crash. Work that
  // must finish (the demo stopping what it started) goes on; its exit status is not an error of ours.
  process.stdout.on('error', () => s.goneOut());
  process.stderr.on('error', () => {
    s.errGone = true;
  });
  streams = s;
  return s;
}

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

/** The JSON form of an error: `{ error: { code, message, issues?, details? } }`. */
export function errorJson(err: unknown): { error: Record<string, unknown> } {
  if (err instanceof ValidationError) return { error: { ...err.toJSON(), issues: err.issues } };
  if (err instanceof RunlogError) return { error: err.toJSON() };
  return { error: { code: 'INTERNAL', message: err instanceof Error ? err.message : String(err) } };
}

/**
 * Errors go to stderr — one line of text, or with --json one JSON object on one line — and become an exit code
 * (exitCodeFor). The message already carries every reason (ValidationError states each issue once).
 */
export function reportError(io: Io, err: unknown): number {
  if (io.json) io.err(JSON.stringify(errorJson(err)));
  else {
    const code = err instanceof RunlogError ? err.code : 'INTERNAL';
    io.err(`runlog: ${code}: ${err instanceof Error ? err.message : String(err)}`);
    if (!(err instanceof RunlogError) && err instanceof Error) {
      if (process.env.RUNLOG_DEBUG) io.err(err.stack ?? '');
      else io.err('runlog: (an unexpected error; RUNLOG_DEBUG=1 prints its stack)');
    }
  }
  return exitCodeFor(err);
}
