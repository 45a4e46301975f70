// What is checked of a log file before SQLite touches it, and how SQLite's failures become runlog's typed errors.
// Opening never damages a file it does not recognise: a foreign, empty, short or truncated file, or a damaged
// WAL, is refused with an error naming the file, and left exactly as it was.
import { closeSync, linkSync, mkdirSync, openSync, readSync, statSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import {
  ForeignDatabaseError,
  LogMissingError,
  LogUnreadableError,
  RunlogError,
  StoreCorruptError,
  StoreEmptyError,
  StoreTruncatedError,
  StoreVersionError,
  StoreWalDamagedError,
  StoreWriteError,
} from '../../domain/errors.ts';
import { computeChain } from './chain-check.ts';
import { readOnlyTarget } from './read-only-target.ts';
import { APPLICATION_ID, CHAIN_MIGRATION, LATEST_SCHEMA, MIGRATIONS } from './schema.ts';
import { readShutdownRecord } from './shutdown-record.ts';
import { Database } from './driver.ts';
import { scanWal } from './wal-scan.ts';

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * Checks the first bytes before SQLite sees the file. An empty file is refused: SQLite would take it for a new,
 * empty database and a truncated log would silently become a valid empty one. New logs are never empty on
 * disk (see createLogFile), so a 0-byte file is always damage.
 */
export function checkHeader(file: string): void {
  let size: number;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new StoreCorruptError(file, 'not a regular file');
    size = st.size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new LogMissingError(file);
    if ((err as NodeJS.ErrnoException).code === 'EACCES') throw new LogUnreadableError(file, 'permission denied');
    throw err;
  }
  if (size === 0) throw new StoreEmptyError(file);
  if (size < 100)
    throw new StoreTruncatedError(file, `the file is ${size} bytes, shorter than a SQLite header`, { size });
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EACCES') throw new LogUnreadableError(file, 'permission denied');
    throw err;
  }
  try {
    const head = Buffer.alloc(100);
    readSync(fd, head, 0, 100, 0);
    if (!head.subarray(0, 16).equals(SQLITE_HEADER))
      throw new StoreCorruptError(file, 'not a SQLite database (bad header)');
    checkLength(file, size, head);
  } finally {
    closeSync(fd);
  }
}

/**
 * Whether the file is exactly as a writer's clean close left it: no WAL, and the size and modification time its
 * shutdown record holds. PRAGMA quick_check (a walk of every page: about 1.1 s per 150 MB) then has nothing new
 * to find, and an open costs the same whatever the log's length. After a crash, a copy, or any change made
 * without a clean close, it runs as before. Content changes inside pages are the hash chain's to find.
 */
export function untouchedSinceCleanShutdown(file: string): boolean {
  const record = readShutdownRecord(file);
  if (!record || record.mtimeMs === undefined || walBytes(file) > 0) return false;
  try {
    const st = statSync(file);
    return st.size === record.size && st.mtimeMs === record.mtimeMs;
  } catch {
    return false;
  }
}

/** Bytes in a WAL file (0 when there is none). */
export function walBytes(file: string): number {
  try {
    return statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
}

/** Bytes on disk: the database file and its WAL (metrics, retention's before and after). */
export function logBytes(file: string): number {
  if (file === ':memory:') return 0;
  let n = 0;
  for (const f of [file, `${file}-wal`]) {
    try {
      n += statSync(f).size;
    } catch {
      /* no WAL right now */
    }
  }
  return n;
}

/**
 * A file shorter than it should be. SQLite keeps the database's page count in its header (valid while the
 * "version-valid-for" field equals the change counter), and a file is always a whole number of pages. With a
 * non-empty WAL the header may be ahead of the file (a checkpoint cut short: SQLite redoes it from the WAL), so
 * the page count is compared only when there is none. And a log shorter than its last clean shutdown recorded
 * is refused whatever its header says: the header of an old copy is consistent with itself.
 */
function checkLength(file: string, size: number, head: Buffer): void {
  const raw = head.readUInt16BE(16);
  const pageSize = raw === 1 ? 65536 : raw;
  if (pageSize >= 512 && size % pageSize !== 0)
    throw new StoreTruncatedError(file, `the file is ${size} bytes, not a whole number of ${pageSize}-byte pages`, {
      size,
      pageSize,
    });
  const wal = walBytes(file);
  if (wal > 0) return;
  const pages = head.readUInt32BE(28);
  if (pages > 0 && head.readUInt32BE(24) === head.readUInt32BE(92) && pages * pageSize > size) {
    throw new StoreTruncatedError(
      file,
      `its header says ${pages} pages (${pages * pageSize} bytes) but the file has ${size} bytes`,
      { size, expected: pages * pageSize },
    );
  }
  const record = readShutdownRecord(file);
  if (record && size < record.size) {
    throw new StoreTruncatedError(
      file,
      `the file is ${size} bytes; at its last clean shutdown (${record.at}) it was ${record.size} bytes`,
      { size, expected: record.size },
    );
  }
}

/**
 * A damaged frame in the WAL (see sqlite/wal-scan.ts), found before SQLite would recover the WAL and drop it. The last
 * good position is what SQLite sees of the log: read read-only, which changes neither the file nor the WAL.
 */
export function checkWal(file: string): void {
  const damage = walDamage(file);
  if (damage) throw damage;
}

/** The damage checkWal refuses a writer's open for, as an error to report (`runlog verify`), or null. */
export function walDamage(file: string): StoreWalDamagedError | null {
  const scan = scanWal(`${file}-wal`);
  if (!scan || scan.damagedFrame === null) return null;
  let lastGoodSeq: number | null = null;
  try {
    // Read as inspection reads (sqlite/read-only-target.ts): opened in place, SQLite would create a -shm beside the log.
    const { target, release } = readOnlyTarget(file, false);
    try {
      const db = new Database(target, { readonly: true, fileMustExist: true });
      try {
        lastGoodSeq = (db.prepare('SELECT coalesce(max(seq), 0) AS s FROM events').get() as { s: number }).s;
      } finally {
        db.close();
      }
    } finally {
      release();
    }
  } catch {
    /* the position stays unknown; the frame number is still reported */
  }
  return new StoreWalDamagedError(file, scan.damagedFrame, scan.lastCommitFrame, lastGoodSeq);
}

/**
 * Creates a new log atomically, mode 0600 from the first byte: the schema is written into a temporary file
 * (created 0600, so SQLite's -journal inherits that mode too) and linked into place only when complete. A log
 * file that exists is therefore always initialised; link() never replaces a file another process created meanwhile.
 */
export function createLogFile(file: string): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.creating-${process.pid}-${Date.now()}`;
  closeSync(openSync(tmp, 'wx', 0o600));
  try {
    const db = new Database(tmp);
    try {
      // Before the first table: free pages can then be given back (retention) without a VACUUM of the whole file.
      db.pragma('auto_vacuum = INCREMENTAL');
      db.transaction(() => {
        for (const m of MIGRATIONS) db.exec(m);
        db.pragma(`application_id = ${APPLICATION_ID}`);
        db.pragma(`user_version = ${LATEST_SCHEMA}`);
      }).immediate();
    } finally {
      db.close();
    }
    try {
      linkSync(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; // created by someone else: open theirs
    }
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      /* already gone */
    }
  }
}

export function sqliteCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

/** Maps SQLite's failures onto runlog's typed errors. */
export function translate(file: string, err: unknown): unknown {
  if (err instanceof RunlogError) return err;
  const code = sqliteCode(err) ?? '';
  const msg = err instanceof Error ? err.message : String(err);
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB')
    return new StoreCorruptError(file, msg, { cause: err });
  if (code.startsWith('SQLITE_FULL')) return new StoreWriteError(file, `disk full (${msg})`, { cause: err });
  if (code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_READONLY') || code.startsWith('SQLITE_CANTOPEN')) {
    return new StoreWriteError(file, `${code}: ${msg}`, { cause: err });
  }
  if (code.startsWith('SQLITE_BUSY'))
    return new RunlogError('STORE_BUSY', `event log ${file} is locked by another writer: ${msg}`, { file });
  // The WAL guard's marker file (sqlite/wal-guard.ts) is written next to the database.
  if (code === 'ENOSPC') return new StoreWriteError(file, `disk full (${msg})`, { cause: err });
  if (code === 'EROFS' || code === 'EACCES' || code === 'EPERM' || code === 'EIO' || code === 'EDQUOT')
    return new StoreWriteError(file, `${code}: ${msg}`, { cause: err });
  return err;
}

/**
 * Checks that SQLite opened a runlog log it may use, then (a writer) sets the pragmas and migrates its schema.
 * `untouched`: the file is as the last clean shutdown left it, which SQLite had checked (see untouchedSinceCleanShutdown).
 */
export function openSchema(
  db: Database.Database,
  file: string,
  readOnly: boolean,
  options: { skipQuickCheck?: boolean; synchronous?: 'FULL' | 'NORMAL' },
  untouched = false,
): void {
  // Read-only checks first: nothing is written to a file until we know it is ours and sound. A writer checks the
  // whole file (quick_check) before it appends, unless the file is untouched since its last clean shutdown;
  // inspection does not (a second per 150 MB before the first line): the header checks above and below still
  // refuse an empty, short, truncated or foreign file, damage found while reading is STORE_CORRUPT, and a deep
  // check of a log is an explicit command's job (`runlog verify`).
  if (!options.skipQuickCheck && !readOnly && !untouched) {
    const rows = db.pragma('quick_check') as { quick_check: string }[];
    const problems = rows.map((r) => r.quick_check).filter((r) => r !== 'ok');
    if (problems.length > 0) throw new StoreCorruptError(file, `quick_check: ${problems.slice(0, 5).join('; ')}`);
  }
  const appId = db.pragma('application_id', { simple: true }) as number;
  const userVersion = db.pragma('user_version', { simple: true }) as number;
  const tables = (db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number }).n;
  if (appId !== APPLICATION_ID && (appId !== 0 || tables > 0 || userVersion !== 0)) {
    throw new ForeignDatabaseError(
      file,
      appId !== 0 ? `application_id is 0x${appId.toString(16)}` : `it has ${tables} tables of another program`,
    );
  }
  if (userVersion > LATEST_SCHEMA) throw new StoreVersionError(file, userVersion, LATEST_SCHEMA);
  if (readOnly) {
    // Nothing may be written: a file that is not yet a runlog log (no schema) is not one to inspect.
    if (appId !== APPLICATION_ID || userVersion !== LATEST_SCHEMA) {
      throw new StoreCorruptError(
        file,
        userVersion === 0
          ? 'it holds no runlog schema (an uninitialised or foreign SQLite file)'
          : `schema version ${userVersion} needs an upgrade that only a writer runs`,
      );
    }
    db.pragma('query_only = ON');
    return;
  }

  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
  db.pragma('foreign_keys = ON');

  if (userVersion < LATEST_SCHEMA) {
    db.transaction(() => {
      for (let v = userVersion; v < LATEST_SCHEMA; v++) {
        db.exec(MIGRATIONS[v]!);
        if (v + 1 === CHAIN_MIGRATION) computeChain(db);
      }
      db.pragma(`application_id = ${APPLICATION_ID}`);
      db.pragma(`user_version = ${LATEST_SCHEMA}`);
    }).immediate();
  }
}
