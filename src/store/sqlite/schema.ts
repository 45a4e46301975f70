// Schema migrations, keyed by PRAGMA user_version. A migration is only ever appended to this list;
// an applied one is never edited (old files must keep opening).

/** 'RLOG' — marks a SQLite file as a runlog event log, so a foreign database is never mistaken for one. */
export const APPLICATION_ID = 0x524c4f47;

export const MIGRATIONS: readonly string[] = [
  // 1: the log and the actors projection. A stream's version is max(version) over its events, read
  // through the UNIQUE(stream, version) index: no second table to keep in step on every append.
  `CREATE TABLE events (
     seq     INTEGER PRIMARY KEY,
     stream  TEXT    NOT NULL,
     version INTEGER NOT NULL,
     type    TEXT    NOT NULL,
     schema  INTEGER NOT NULL DEFAULT 1,
     data    TEXT    NOT NULL,
     meta    TEXT    NOT NULL DEFAULT '{}',
     at      TEXT    NOT NULL,
     UNIQUE (stream, version)
   );
   CREATE TABLE actors (
     id         TEXT PRIMARY KEY,
     kind       TEXT NOT NULL,
     stream     TEXT NOT NULL UNIQUE,
     state      TEXT NOT NULL,
     status     TEXT NOT NULL,
     version    INTEGER NOT NULL,
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL,
     summary    TEXT NOT NULL DEFAULT '{}'
   );
   CREATE INDEX actors_kind_status ON actors(kind, status);`,
  // 2: documents of the projections registered with the event-store port (port.ts, sqlite/port-adapter.ts), written in
  // the append's transaction. Older runlogs never read it; the `actors` table above stays until the actor host
  // moves onto the port.
  `CREATE TABLE projection_documents (
     projection TEXT NOT NULL,
     id         TEXT NOT NULL,
     doc        TEXT NOT NULL,
     PRIMARY KEY (projection, id)
   ) WITHOUT ROWID;`,
  // 3: the supervisor's heartbeat (one row): whether anything supervises this log right now, and since when not.
  // Not an event: liveness is a fact about a process, not about an actor, and it would flood the log.
  `CREATE TABLE supervisor_heartbeat (
     id          INTEGER PRIMARY KEY CHECK (id = 1),
     node        TEXT    NOT NULL,
     pid         INTEGER NOT NULL,
     started_at  TEXT    NOT NULL,
     beat_at     TEXT    NOT NULL,
     interval_ms INTEGER NOT NULL,
     stopped_at  TEXT
   );`,
  // 4: the hash chain (chain.ts). Each event's hash links it to the one before it; chain_head holds the last
  // link, so events cut from the end of the log are noticed too. Logs from before get their chain computed as
  // this migration is applied (sqlite/event-store.ts, in the same transaction).
  `ALTER TABLE events ADD COLUMN hash BLOB;
   CREATE TABLE chain_head (
     id   INTEGER PRIMARY KEY CHECK (id = 1),
     seq  INTEGER NOT NULL,
     hash BLOB    NOT NULL
   );`,
  // 5: snapshots, a cache of folds (inspect/snapshots.ts): the newest per stream. The actors projection says which
  // version each stream's snapshot stands at, so a deleted one is noticed (runlog verify) rather than just missed.
  `CREATE TABLE snapshots (
     stream      TEXT    PRIMARY KEY,
     version     INTEGER NOT NULL,
     fingerprint TEXT    NOT NULL,
     created_at  TEXT    NOT NULL,
     state       TEXT    NOT NULL,
     checksum    TEXT    NOT NULL
   );
   ALTER TABLE actors ADD COLUMN snapshot_version INTEGER;`,
  // 6: retention (sqlite/archive.ts). `archives`: each archive file written, with the chain link it ends on.
  // `tombstones`: an archived actor's last projection row and where its events went (its `actors` row stays, so
  // `ps --all` still lists it; `rebuild` puts it back from here). `chain_gaps`: one row per hole that archiving
  // left in the seqs (from_seq..seq), holding the hash of its last event, so the chain of the remaining events
  // stays checkable link by link and a hole no archive made is still damage. Space comes back through
  // auto_vacuum=INCREMENTAL, set on new logs at creation and switched on an older log (it takes one VACUUM) by its
  // first archive run.
  `CREATE TABLE archives (
     id         INTEGER PRIMARY KEY,
     file       TEXT    NOT NULL,
     created_at TEXT    NOT NULL,
     before     TEXT    NOT NULL,
     actors     INTEGER NOT NULL,
     events     INTEGER NOT NULL,
     bytes      INTEGER NOT NULL,
     sha256     TEXT    NOT NULL,
     last_seq   INTEGER NOT NULL,
     last_hash  BLOB    NOT NULL
   );
   CREATE TABLE tombstones (
     stream     TEXT    PRIMARY KEY,
     id         TEXT    NOT NULL,
     kind       TEXT    NOT NULL,
     state      TEXT    NOT NULL,
     status     TEXT    NOT NULL,
     version    INTEGER NOT NULL,
     created_at TEXT    NOT NULL,
     updated_at TEXT    NOT NULL,
     summary    TEXT    NOT NULL,
     archive    INTEGER NOT NULL REFERENCES archives(id),
     first_seq  INTEGER NOT NULL,
     last_seq   INTEGER NOT NULL
   );
   CREATE TABLE chain_gaps (
     seq      INTEGER PRIMARY KEY,
     from_seq INTEGER NOT NULL,
     hash     BLOB    NOT NULL
   );`,
  // 7: older snapshots (snapshots.ts): when an actor's snapshot is replaced by a newer one, the old one moves here,
  // so `replay <id> --to <v>` starts from the newest snapshot at or before v. Actors that never reach 100 events
  // have one snapshot (their terminal one) and nothing here. A cache like `snapshots`: deleting it changes no answer.
  `CREATE TABLE snapshot_history (
     stream      TEXT    NOT NULL,
     version     INTEGER NOT NULL,
     fingerprint TEXT    NOT NULL,
     created_at  TEXT    NOT NULL,
     state       TEXT    NOT NULL,
     checksum    TEXT    NOT NULL,
     PRIMARY KEY (stream, version)
   ) WITHOUT ROWID;`,
];

/** The migration that introduced the hash chain: applying it computes the chain of the events already there. */
export const CHAIN_MIGRATION = 4;

export const LATEST_SCHEMA = MIGRATIONS.length;
