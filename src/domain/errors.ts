// Every error runlog throws on purpose carries a stable `code`, so callers (and the CLI's --json)
// can branch on it without parsing messages. The codes, their categories, and the exit and HTTP statuses derived from
// them are one table: error-codes.ts.
import type { ErrorCode } from './error-codes.ts';

export type { ErrorCode };

/**
 * The base of every error runlog throws on purpose. Branch on its `code`, never on its message: each code has a
 * category, which gives the CLI's exit status and the HTTP API's status (docs/reference/errors.md).
 */
export class RunlogError extends Error {
  /** Stable across releases. */
  readonly code: ErrorCode;
  /** What the message says, as data (a stream and its versions, a file, the issues), when there is any. */
  readonly details: Record<string, unknown> | undefined;
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }
  /** What `--json` and the HTTP API write under `error`: the code, the message and the details. */
  toJSON(): Record<string, unknown> {
    return { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) };
  }
}

/** `append` was given an expectedVersion that no longer matches the stream. */
export class ConcurrencyError extends RunlogError {
  constructor(
    readonly stream: string,
    readonly expected: number,
    readonly actual: number,
  ) {
    super('CONCURRENCY', `stream ${stream}: expected version ${expected}, found ${actual}`, {
      stream,
      expected,
      actual,
    });
  }
}

/** The database file is damaged (not SQLite, failed quick_check, truncated). It is never overwritten. */
export class StoreCorruptError extends RunlogError {
  constructor(
    readonly file: string,
    reason: string,
    options?: { cause?: unknown; code?: ErrorCode; details?: Record<string, unknown> },
  ) {
    super(
      options?.code ?? 'STORE_CORRUPT',
      `event log ${file} is damaged: ${reason}. It was left untouched; restore it from a backup or move it aside.`,
      { file, reason, ...options?.details },
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
  }
}

// The damage kinds below are each a StoreCorruptError (callers that only ask "is it damaged?" keep working) with a
// code of its own, so a script or an operator can tell them apart without parsing messages.

/** The file has 0 bytes: SQLite would open it as a new, empty log. A new log is never empty on disk. */
export class StoreEmptyError extends StoreCorruptError {
  constructor(file: string) {
    super(file, 'the file is empty (0 bytes), as a truncated log would be; it is not opened as a new log', {
      code: 'STORE_EMPTY',
    });
  }
}

/** The file is shorter than its own header says, or than the last clean shutdown recorded. */
export class StoreTruncatedError extends StoreCorruptError {
  constructor(file: string, reason: string, details?: Record<string, unknown>) {
    super(file, `truncated: ${reason}`, { code: 'STORE_TRUNCATED', ...(details ? { details } : {}) });
  }
}

/** An event's stored bytes no longer hash to the chain: the first bad position is named. */
export class StoreChainError extends StoreCorruptError {
  constructor(
    file: string,
    readonly seq: number,
    reason: string,
    details?: Record<string, unknown>,
  ) {
    super(file, `hash chain broken at seq ${seq}: ${reason}`, {
      code: 'STORE_CHAIN_BROKEN',
      details: { seq, ...details },
    });
  }
}

/** Frames of the write-ahead log fail their checksum while later ones pass: committed events would be dropped silently. */
export class StoreWalDamagedError extends StoreCorruptError {
  constructor(
    file: string,
    readonly frame: number,
    readonly lastGoodFrame: number,
    readonly lastGoodSeq: number | null,
  ) {
    super(
      file,
      `its write-ahead log ${file}-wal has a damaged frame (${frame}) followed by intact ones; ` +
        'SQLite would silently drop every commit from there on. ' +
        `The last good position is frame ${lastGoodFrame}${lastGoodSeq !== null ? ` (event seq ${lastGoodSeq})` : ''}`,
      { code: 'STORE_WAL_DAMAGED', details: { frame, lastGoodFrame, lastGoodSeq } },
    );
  }
}

/** The database file is a valid SQLite file that some other program owns. */
export class ForeignDatabaseError extends RunlogError {
  constructor(
    readonly file: string,
    reason: string,
  ) {
    super('STORE_FOREIGN', `${file} is not a runlog event log (${reason}); refusing to touch it`, { file, reason });
  }
}

/** The database was written by a newer runlog than this one. */
export class StoreVersionError extends RunlogError {
  constructor(
    readonly file: string,
    found: number,
    supported: number,
  ) {
    super(
      'STORE_TOO_NEW',
      `event log ${file} has schema version ${found}; this runlog understands up to ${supported}. Upgrade runlog.`,
      { file, found, supported },
    );
  }
}

/** Writing failed (disk full, read-only, I/O error). Nothing from the failed call was committed. */
export class StoreWriteError extends RunlogError {
  constructor(
    readonly file: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(
      'STORE_WRITE',
      `could not write to event log ${file}: ${reason}. Nothing from this append was committed.`,
      { file, reason },
      options,
    );
  }
}

export class NotFoundError extends RunlogError {
  constructor(what: string, id: string) {
    super('NOT_FOUND', `${what} not found: ${id}`, { what, id });
  }
}

/**
 * A message that carries every issue exactly once: issues the message already states (a caller that wrote
 * "invalid x: <the one issue>", or a message that came back from the API whole) are not repeated; one more
 * issue is appended after a colon, several as a list.
 */
export function withIssues(message: string, issues: readonly string[]): string {
  const missing = issues.filter((i) => !message.includes(i));
  if (missing.length === 0) return message;
  if (missing.length === 1) return `${message}: ${missing[0]}`;
  return `${message}:\n  - ${missing.join('\n  - ')}`;
}

/** Input at a boundary was malformed. `issues` lists every problem found, not only the first; the message states each once. */
export class ValidationError extends RunlogError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly issues: readonly string[] = [],
    details?: Record<string, unknown>,
  ) {
    super(code, withIssues(message, issues), { ...details, issues });
  }
}

/** An event could not be upcast to the current schema: names the first event replay cannot apply. */
export class ReplayError extends RunlogError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('REPLAY', message, details);
  }
}

/** `replay --to N` (or `?to=N`) past the actor's last event: the caller's number is wrong (exit 2, HTTP 400), not the log. */
export class ReplayToInvalidError extends ValidationError {
  constructor(id: string, last: number, to: number) {
    super('REPLAY_TO_INVALID', `${id} has ${last} events; cannot replay to ${to}`, [], { id, to, last });
  }
}

export class UsageError extends RunlogError {
  constructor(message: string) {
    super('USAGE', message);
  }
}

/** An inspection was pointed at a log that does not exist (nothing is created in its place). */
export class LogMissingError extends RunlogError {
  constructor(readonly file: string) {
    super('LOG_MISSING', `no log at ${file} (check --db / --home / $RUNLOG_HOME; inspection never creates one)`, {
      file,
    });
  }
}

/** A write was attempted through a log opened read-only (inspection). */
export class ReadOnlyLogError extends RunlogError {
  constructor(
    readonly file: string,
    what = 'append',
  ) {
    super('READ_ONLY', `event log ${file} is open read-only (inspection): cannot ${what}`, { file });
  }
}

/** Who holds a log's writer lock, as far as its holder file tells. */
export interface WriterHolderInfo {
  pid: number;
  since: string;
  command: string;
  listen: string | null;
}

/** Another process (a supervisor, or a one-shot command that runs effects) is the log's writer. Nothing was touched. */
export class SupervisorRunningError extends RunlogError {
  constructor(
    readonly file: string,
    readonly holder: WriterHolderInfo | null,
  ) {
    const who = holder
      ? `pid ${holder.pid} (${holder.command}${holder.listen ? `, listening on ${holder.listen}` : ''}) since ${holder.since}`
      : 'another process (its details are not readable yet)';
    super(
      'SUPERVISOR_RUNNING',
      `event log ${file} already has a writer: ${who}. Nothing was changed. ` +
        'Stop it first, or let it do the work: spawn/stop/kill/cap/exec/reconcile reach a running supervisor through its API.',
      { file, holder },
    );
  }
}

/** `server.json` cannot be trusted with the API token (owner, mode or address): the token is not sent. */
export class ServerInfoUntrustedError extends RunlogError {
  constructor(
    readonly file: string,
    reason: string,
  ) {
    super(
      'SERVER_INFO_UNTRUSTED',
      `refusing to use ${file}: ${reason}. The API token was not sent; remove the file if it is not yours.`,
      { file, reason },
    );
  }
}

/** The runlog home is writable by other users (they could plant a server.json or swap the log). */
export class HomeInsecureError extends RunlogError {
  constructor(
    readonly dir: string,
    mode: number,
  ) {
    super(
      'HOME_INSECURE',
      `${dir} is writable by other users (mode 0${mode.toString(8)}); runlog serve refuses it. ` +
        `Run: chmod go-w ${dir} (runlog creates its home 0700)`,
      { dir, mode },
    );
  }
}

/** The log exists but this user cannot read it (permissions). Nothing was changed. */
export class LogUnreadableError extends RunlogError {
  constructor(
    readonly file: string,
    reason: string,
  ) {
    super('LOG_UNREADABLE', `cannot read event log ${file}: ${reason}`, { file, reason });
  }
}

/** A supervisor no longer holds the actor's lease (expired, or taken over by another node): nothing was appended. */
export class FencedError extends RunlogError {
  constructor(
    readonly stream: string,
    readonly node: string,
  ) {
    super(
      'FENCED',
      `${node} no longer owns ${stream}: its lease expired or another supervisor took it over; nothing was appended`,
      { stream, node },
    );
  }
}

/**
 * An event (or its projection row) that JSON cannot encode: a BigInt, a cycle, nesting deeper than MAX_EVENT_DEPTH.
 * It fails only its own append; nothing of it was written.
 */
export class EventEncodingError extends RunlogError {
  constructor(stream: string, type: string, reason: string, options?: { cause?: unknown }) {
    super(
      'EVENT_NOT_ENCODABLE',
      `event ${type} for ${stream} cannot be encoded as JSON (${reason}); nothing was appended`,
      { stream, type, reason },
      options,
    );
  }
}

/** The codes a runner refuses a job record with; each is answered with a receipt that names it. */
export type JobRefusalCode = 'JOB_EXPIRED' | 'JOB_RATE_LIMITED' | 'JOB_UNVERIFIED' | 'JOB_UNREADABLE';

/** A runner will not run a job record addressed to it (its notAfter passed, its repo is over the rate): nothing ran. */
export class JobRefusedError extends RunlogError {
  /** Why: the receipt that answers the job names it. */
  declare readonly code: JobRefusalCode;
  constructor(code: JobRefusalCode, message: string, details?: Record<string, unknown>) {
    super(code, message, details);
  }
}
