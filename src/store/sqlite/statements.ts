// The SQLite event store's prepared statements (event-store.ts), prepared once when the log opens: the append's
// writes (events, the chain's head, the actors row, snapshots) and the reads every call makes. Kept apart from the
// store because they are the store's SQL and nothing else; a read-only open prepares none of the writes, since the
// tables they touch may not be writable there.
import type { Database } from './driver.ts';
import type { SnapshotRow } from './engine-types.ts';
import type { EventRow } from './event-pages.ts';

export interface Statements {
  streamVersion: Database.Statement<[string], { version: number | null }>;
  insertEvent: Database.Statement<[number, string, number, string, number, string, string, string, Buffer]>;
  upsertActor: Database.Statement<[string, string, string, string, string, number, string, string, string]>;
  readStream: Database.Statement<[string, number, number], EventRow>;
  readAll: Database.Statement<[number, number], EventRow>;
  dataVersion: Database.Statement<[], { data_version: number }>;
  /** The chain (chain.ts): its last link, and the next seq. Undefined when read-only. */
  chainHead?: Database.Statement<[], { seq: number; hash: Buffer }>;
  maxSeq: Database.Statement<[], { s: number }>;
  setChainHead?: Database.Statement<[number, Buffer]>;
  putSnapshot?: Database.Statement<[string, number, string, string, string, string]>;
  keepOlderSnapshot?: Database.Statement<[string, number]>;
  markSnapshot?: Database.Statement<[number, string]>;
  getSnapshot: Database.Statement<[string], SnapshotRow>;
}

export function prepareStatements(db: Database.Database, readOnly: boolean): Statements {
  return {
    // `+?`, not `?`: the same plan and bytecode, but this SQLite build (STAT4) recompiles a statement each time a
    // plain parameter in its WHERE is bound again, in case the value changes the plan; this one runs every append.
    streamVersion: db.prepare('SELECT max(version) AS version FROM events WHERE stream = +?'),
    insertEvent: db.prepare(
      'INSERT INTO events (seq, stream, version, type, schema, data, meta, at, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    upsertActor: db.prepare(
      `INSERT INTO actors (id, kind, stream, state, status, version, created_at, updated_at, summary)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET state = excluded.state, status = excluded.status, version = excluded.version,
           updated_at = excluded.updated_at, summary = excluded.summary`,
    ),
    readStream: db.prepare('SELECT * FROM events WHERE stream = ? AND version >= ? AND version <= ? ORDER BY version'),
    readAll: db.prepare('SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?'),
    dataVersion: db.prepare('PRAGMA data_version'),
    maxSeq: db.prepare('SELECT coalesce(max(seq), 0) AS s FROM events'),
    getSnapshot: db.prepare('SELECT * FROM snapshots WHERE stream = ?'),
    ...(readOnly
      ? {}
      : {
          chainHead: db.prepare('SELECT seq, hash FROM chain_head WHERE id = 1'),
          setChainHead: db.prepare(
            'INSERT INTO chain_head (id, seq, hash) VALUES (1, ?, ?) ' +
              'ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash',
          ),
          putSnapshot: db.prepare(
            'INSERT OR REPLACE INTO snapshots (stream, version, fingerprint, created_at, state, checksum) VALUES (?, ?, ?, ?, ?, ?)',
          ),
          keepOlderSnapshot: db.prepare(
            'INSERT OR REPLACE INTO snapshot_history SELECT stream, version, fingerprint, created_at, state, checksum ' +
              'FROM snapshots WHERE stream = ? AND version < ?',
          ),
          markSnapshot: db.prepare('UPDATE actors SET snapshot_version = ? WHERE stream = ?'),
        }),
  };
}
