// Connections to a PostgreSQL log: the pools (durable on commit, bounded lock waits), checking a client out for a
// transaction, node-postgres failures as runlog's typed errors, and the schema's creation or migration on open.
import pg from 'pg';
import { ForeignDatabaseError, RunlogError, StoreVersionError, StoreWriteError } from '../../domain/errors.ts';
import { MIGRATE_LOCK_CLASS, PG_APPLICATION, PG_LATEST_SCHEMA, PG_MIGRATIONS } from './schema.ts';

/** PostgreSQL is not answering (or the connection broke mid-call). */
export class StoreUnavailableError extends RunlogError {
  constructor(where: string, reason: string, options?: { cause?: unknown }) {
    super(
      'STORE_UNAVAILABLE',
      `PostgreSQL at ${where} is not answering (${reason}). Start it (\`npm run setup\` does, on this machine); ` +
        'an append that was cut off may or may not have committed: read the stream to see.',
      { where, reason },
      options,
    );
  }
}

/** The server would acknowledge commits that are not yet on disk. */
export class StoreNotDurableError extends RunlogError {
  constructor(where: string, setting: string, value: string) {
    super(
      'STORE_NOT_DURABLE',
      `PostgreSQL at ${where} has ${setting}=${value}: a commit could be lost after it was acknowledged. ` +
        'runlog needs synchronous_commit on and fsync on.',
      { where, setting, value },
    );
  }
}

const INT8 = 20;
export const DEFAULT_HOLD_LIMIT_MS = 10_000;

/**
 * A pool of sessions on the log's schema: durable on commit whatever the server or role default; search_path pins
 * the schema; READ COMMITTED (append_events needs a fresh snapshot per statement, postgres/schema.ts); lock waits and
 * idle transactions bounded (holdLimitMs).
 */
export function makePool(url: string, schema: string, max: number, holdLimitMs: number): pg.Pool {
  const limit = Math.max(100, Math.round(holdLimitMs));
  const pool = new pg.Pool({
    connectionString: url,
    max,
    connectionTimeoutMillis: 10_000,
    options:
      `-c search_path=${schema} -c synchronous_commit=on -c default_transaction_isolation=read\\ committed ` +
      `-c lock_timeout=${limit} -c idle_in_transaction_session_timeout=${limit}`,
    // int8 (positions) as numbers: exact up to 2^53, far beyond any log.
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as never,
    },
  });
  // An idle client's error (the server restarting) must not crash the process; the next query reports it.
  pool.on('error', () => {});
  return pool;
}

/** A URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable PostgreSQL URL)';
  }
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH']);

/**
 * Maps node-postgres failures onto runlog's typed errors. A connection that broke between two statements of a
 * transaction (the server restarting, its postmaster killed) fails the next one with a plain Error ("Client has
 * encountered a connection error and is not queryable"): unavailable too, so an observed fact's append waits.
 */
export function translate(where: string, err: unknown): unknown {
  if (err instanceof RunlogError) return err;
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : '';
  const msg = err instanceof Error ? err.message : String(err);
  if (
    CONNECTION_CODES.has(code) ||
    code.startsWith('08') ||
    code === '25P03' ||
    code === '57P01' ||
    code === '57P02' ||
    code === '57P03' ||
    /Connection terminated|connection timeout|is not queryable/i.test(msg)
  ) {
    return new StoreUnavailableError(where, code ? `${code}: ${msg}` : msg, { cause: err });
  }
  if (code === '53100' || code === '53200' || code.startsWith('58'))
    return new StoreWriteError(where, `${code}: ${msg}`, { cause: err });
  return err;
}

/**
 * Checks a client out of the pool for a transaction. While a client is checked out the pool no longer listens for
 * its errors, and node-postgres emits a connection that breaks between two statements (the server restarting, its
 * postmaster killed) as an 'error' event: unheard, it ends the process. Heard here, the next statement (or the
 * release) finds the connection gone; `release` then destroys the client instead of pooling it.
 */
export async function checkout(pool: pg.Pool): Promise<{ client: pg.PoolClient; release(broken?: boolean): void }> {
  const client = await pool.connect();
  let lost = false;
  const onError = (): void => {
    lost = true;
  };
  client.on('error', onError);
  return {
    client,
    release(broken = false) {
      client.removeListener('error', onError);
      client.release(broken || lost);
    },
  };
}

const DURABLE_COMMIT = new Set(['on', 'remote_apply', 'remote_write', 'local']);

/** Checks that the server commits durably, then creates or migrates the log's schema (one migrator at a time). */
export async function migrate(pool: pg.Pool, schema: string, where: string): Promise<void> {
  const { client, release } = await checkout(pool);
  try {
    const { rows } = await client.query<{ sc: string; fsync: string }>(
      "SELECT current_setting('synchronous_commit') AS sc, current_setting('fsync') AS fsync",
    );
    if (!DURABLE_COMMIT.has(rows[0]!.sc)) throw new StoreNotDurableError(where, 'synchronous_commit', rows[0]!.sc);
    if (rows[0]!.fsync !== 'on') throw new StoreNotDurableError(where, 'fsync', rows[0]!.fsync);
    await client.query('BEGIN');
    // Another node migrating may take long (a whole log's chain in migration 4): wait for it, however long.
    await client.query('SET LOCAL lock_timeout = 0');
    // One migrator at a time per schema (two supervisors starting together).
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [MIGRATE_LOCK_CLASS, schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(`SET LOCAL search_path TO ${schema}`);
    const present = await client.query<{ present: boolean }>(
      "SELECT to_regclass(format('%I.runlog_schema', $1::text)) IS NOT NULL AS present",
      [schema],
    );
    const marker = present.rows[0]!.present
      ? await client.query<{ application: string; version: number }>('SELECT application, version FROM runlog_schema')
      : null;
    let version = 0;
    if (marker && marker.rows.length > 0) {
      if (marker.rows[0]!.application !== PG_APPLICATION)
        throw new ForeignDatabaseError(where, `schema ${schema} belongs to ${marker.rows[0]!.application}`);
      version = marker.rows[0]!.version;
    } else {
      const others = await client.query<{ n: number }>(
        'SELECT count(*)::integer AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1',
        [schema],
      );
      if (others.rows[0]!.n > 0)
        throw new ForeignDatabaseError(where, `schema ${schema} holds ${others.rows[0]!.n} objects of another program`);
    }
    if (version > PG_LATEST_SCHEMA)
      throw new StoreVersionError(`${where} (schema ${schema})`, version, PG_LATEST_SCHEMA);
    if (version < PG_LATEST_SCHEMA) {
      if (version === 0)
        await client.query(
          'CREATE TABLE runlog_schema (application text NOT NULL, version integer NOT NULL); ' +
            `INSERT INTO runlog_schema VALUES ('${PG_APPLICATION}', 0)`,
        );
      for (let v = version; v < PG_LATEST_SCHEMA; v++) await client.query(PG_MIGRATIONS[v]!);
      await client.query('UPDATE runlog_schema SET version = $1', [PG_LATEST_SCHEMA]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    release();
  }
}
