// PostgreSQL schema migrations, versioned like the SQLite ones (../schema.ts): a migration is only ever
// appended; an applied one is never edited. The version lives in the schema's `runlog_schema` row (SQLite keeps
// it in PRAGMA user_version), whose `application` marks the schema as a runlog log (like SQLite's
// application_id): a schema holding other tables and no marker is never touched.
//
// Every statement runs with search_path set to the log's schema (postgres/event-store.ts), so one database can hold
// several logs (the tests give each run its own schema).

export const PG_APPLICATION = 'runlog-event-log';

/** Advisory-lock class ids (first key of the two-int form; the second is hashtext(schema)). */
export const APPEND_LOCK_CLASS = 0x524c4f47; // 'RLOG'
export const MIGRATE_LOCK_CLASS = 0x524c4f4d; // 'RLOM'
/** One archive run at a time per log, across every node (postgres/archive.ts). */
export const ARCHIVE_LOCK_CLASS = 0x524c4f41; // 'RLOA'

/**
 * The events of streams that are no actor's: the predicate of migration 10's partial index, which a query must
 * state in these words for PostgreSQL to use that index (open-reads.ts, unheld-reads.ts).
 */
export const UNOWNED_EVENTS = `stream NOT LIKE 'instance-%' AND stream NOT LIKE 'execution-%'`;

export const PG_MIGRATIONS: readonly string[] = [
  // 1: the log, the projections' documents, and the append function.
  `CREATE TABLE events (
     seq     bigint  PRIMARY KEY,
     stream  text    NOT NULL,
     version integer NOT NULL,
     type    text    NOT NULL,
     schema  integer NOT NULL DEFAULT 1,
     data    jsonb   NOT NULL,
     meta    jsonb   NOT NULL DEFAULT '{}',
     at      text    NOT NULL,
     UNIQUE (stream, version)
   );
   CREATE TABLE projection_documents (
     projection text  NOT NULL,
     id         text  NOT NULL,
     doc        jsonb NOT NULL,
     PRIMARY KEY (projection, id)
   );
   -- Appends a batch of requests in the caller's transaction. Request i has p_counts[i] events, taken in order
   -- from the flat event arrays. Returns one row per request: whether its expected version matched, the
   -- version it found, the version after it, and the position of its first event.
   --
   -- Global positions: the transaction-scoped advisory lock serialises every append to this schema until its
   -- transaction ends (commit or rollback), and positions are max(seq) + 1 under it. So positions are assigned
   -- in commit order and are gapless: a reader that has seen position n has seen every committed event below n,
   -- and no event can later appear below it (the sequence/visibility trap of a bigserial column, where a
   -- transaction holding a lower value commits after a higher one is visible, cannot happen). The lock is
   -- released only after the commit is visible to other sessions. Cost: appends to one log do not overlap (one
   -- commit, with its WAL flush, at a time); batching (appendMany, the host's group commit) is how throughput
   -- scales. Readers take no lock and never wait.
   --
   -- This relies on READ COMMITTED (which every runlog session sets): each statement below takes a fresh
   -- snapshot, so max(seq) after the lock sees the previous append's commit. A single SQL statement would not
   -- do: its snapshot is taken before it waits for the lock.
   CREATE FUNCTION append_events(
     p_streams text[], p_expected text[], p_counts integer[],
     p_types text[], p_schemas integer[], p_data text[], p_meta text[], p_at text[]
   ) RETURNS TABLE (o_ok boolean, o_actual integer, o_version integer, o_first bigint)
   LANGUAGE plpgsql AS $fn$
   DECLARE
     n integer := coalesce(array_length(p_streams, 1), 0);
     v_head bigint;
     v_cur integer;
     v_exp text;
     v_cnt integer;
     v_e integer := 1;
     v_j integer;
     v_names text[];
     v_vers integer[];
     v_oks boolean[] := '{}';
     v_curs integer[] := '{}';
     v_firsts bigint[] := '{}';
     v_starts integer[] := '{}';
   BEGIN
     PERFORM pg_advisory_xact_lock(${APPEND_LOCK_CLASS}, hashtext(current_schema()));
     SELECT coalesce(max(seq), 0) INTO v_head FROM events;
     -- The loop only decides (a stream's version is read once, from the index, then kept in v_vers), and one
     -- INSERT writes every accepted event.
     v_names := '{}';
     v_vers := '{}';
     FOR i IN 1 .. n LOOP
       v_cnt := p_counts[i];
       v_exp := p_expected[i];
       v_j := array_position(v_names, p_streams[i]);
       IF v_j IS NULL THEN
         SELECT coalesce(max(version), 0) INTO v_cur FROM events WHERE stream = p_streams[i];
         v_names := v_names || p_streams[i];
         v_vers := v_vers || v_cur;
         v_j := array_length(v_names, 1);
       END IF;
       v_cur := v_vers[v_j];
       v_starts[i] := v_e;
       v_curs[i] := v_cur;
       IF NOT (v_exp = 'any'
               OR (v_exp = 'no-stream' AND v_cur = 0)
               OR (v_exp = 'stream-exists' AND v_cur > 0)
               OR (v_exp NOT IN ('any', 'no-stream', 'stream-exists') AND v_exp::bigint = v_cur)) THEN
         v_oks[i] := false;
         v_firsts[i] := 0;
         o_ok := false; o_actual := v_cur; o_version := v_cur; o_first := 0;
       ELSE
         v_oks[i] := true;
         v_firsts[i] := v_head + 1;
         o_ok := true; o_actual := v_cur; o_version := v_cur + v_cnt;
         o_first := CASE WHEN v_cnt > 0 THEN v_head + 1 ELSE 0 END;
         v_head := v_head + v_cnt;
         v_vers[v_j] := v_cur + v_cnt; -- a later request on the same stream sees this one
       END IF;
       v_e := v_e + v_cnt;
       RETURN NEXT;
     END LOOP;
     INSERT INTO events (seq, stream, version, type, schema, data, meta, at)
     SELECT v_firsts[i] + k - 1, p_streams[i], v_curs[i] + k, p_types[v_starts[i] + k - 1], p_schemas[v_starts[i] + k - 1],
            p_data[v_starts[i] + k - 1]::jsonb, p_meta[v_starts[i] + k - 1]::jsonb, p_at[v_starts[i] + k - 1]
     FROM generate_series(1, n) AS i, generate_series(1, p_counts[i]) AS k
     WHERE v_oks[i];
   END
   $fn$;`,
  // 2: the supervisors sharing the log (one row per node: its heartbeat). ps and inspect read it to say whether
  // anything supervises the log; the cluster reads it to tell live nodes from dead ones.
  `CREATE TABLE nodes (
     node        text    PRIMARY KEY,
     pid         integer NOT NULL,
     host        text    NOT NULL,
     started_at  text    NOT NULL,
     beat_at     text    NOT NULL,
     interval_ms integer NOT NULL,
     stopped_at  text
   );`,
  // 3: leases. A live actor is owned by one node through its lease: a fencing token (from a sequence, so a new
  // owner's token is always higher) and an expiry on the server's clock, renewed by the owner's heartbeat.
  // Every append of an owner checks its lease in the append's transaction (postgres/leases.ts).
  `CREATE SEQUENCE lease_tokens;
   CREATE TABLE leases (
     stream     text        PRIMARY KEY,
     node       text        NOT NULL,
     token      bigint      NOT NULL,
     expires_at timestamptz NOT NULL
   );
   CREATE INDEX leases_node ON leases (node);`,
  // 4: the hash chain (../chain.ts) and snapshots (inspect/snapshots.ts), as on SQLite (its migrations 4, 5, 7).
  //
  // Each event's hash is sha256(previous hash ‖ its canonical bytes), the same function as SQLite's eventHash:
  // a JSON header [seq, stream, version, type, schema, at, data's length in UTF-16 code units], then data, then
  // meta. On PostgreSQL data and meta are jsonb, so their bytes are the server's text of the stored value
  // (data::text), which is what verify reads back; the header is built to be byte for byte JSON.stringify's
  // (to_json(text) escapes strings as it does; the length counts characters beyond U+FFFF twice, as JavaScript
  // does). The chain is computed inside append_events, under the advisory lock that orders global positions:
  // appends from any number of nodes form one chain in seq order. chain_head holds the last link, so events cut
  // from the end of the log are noticed. The events already in the log get their chain here.
  `ALTER TABLE events ADD COLUMN hash bytea;
   CREATE TABLE chain_head (
     id   integer PRIMARY KEY CHECK (id = 1),
     seq  bigint  NOT NULL,
     hash bytea   NOT NULL
   );
   -- PL/pgSQL, not SQL: a SQL function that cannot be inlined (a subquery did that) runs through the executor on
   -- every call from append_events' loop, about 45 µs an event here; this one costs about 4 µs.
   CREATE FUNCTION event_hash(p_prev bytea, p_seq bigint, p_stream text, p_version integer, p_type text, ` +
    `p_schema integer, p_at text, p_data text, p_meta text)
   RETURNS bytea LANGUAGE plpgsql IMMUTABLE STRICT AS $fn$
   BEGIN
     RETURN sha256(p_prev || convert_to(
       '[' || p_seq || ',' || to_json(p_stream)::text || ',' || p_version || ',' || to_json(p_type)::text || ',' || p_schema || ','
           || to_json(p_at)::text || ','
           -- data's length in UTF-16 code units: a character beyond U+FFFF counts twice
           || (char_length(p_data) + CASE WHEN octet_length(p_data) = char_length(p_data) THEN 0
                 ELSE char_length(p_data) - char_length(regexp_replace(p_data, '[\\U00010000-\\U0010FFFF]', '', 'g')) END)
           || ']' || chr(10) || p_data || chr(10) || p_meta, 'UTF8'));
   END
   $fn$;
   DO $do$
   DECLARE
     r record;
     h bytea := decode(repeat('00', 32), 'hex');
     last bigint := 0;
   BEGIN
     FOR r IN SELECT seq, stream, version, type, schema, at, data::text AS d, meta::text AS m FROM events ORDER BY seq LOOP
       h := event_hash(h, r.seq, r.stream, r.version, r.type, r.schema, r.at, r.d, r.m);
       UPDATE events SET hash = h WHERE seq = r.seq;
       last := r.seq;
     END LOOP;
     IF last > 0 THEN INSERT INTO chain_head VALUES (1, last, h); END IF;
   END
   $do$;
   ALTER TABLE events ALTER COLUMN hash SET NOT NULL;
   CREATE TABLE snapshots (
     stream      text    PRIMARY KEY,
     version     integer NOT NULL,
     fingerprint text    NOT NULL,
     created_at  text    NOT NULL,
     state       text    NOT NULL,
     checksum    text    NOT NULL
   );
   -- A snapshot replaced by a newer one moves here (replay --to starts from the newest at or before v).
   CREATE TABLE snapshot_history (
     stream      text    NOT NULL,
     version     integer NOT NULL,
     fingerprint text    NOT NULL,
     created_at  text    NOT NULL,
     state       text    NOT NULL,
     checksum    text    NOT NULL,
     PRIMARY KEY (stream, version)
   );
   CREATE OR REPLACE FUNCTION append_events(
     p_streams text[], p_expected text[], p_counts integer[],
     p_types text[], p_schemas integer[], p_data text[], p_meta text[], p_at text[]
   ) RETURNS TABLE (o_ok boolean, o_actual integer, o_version integer, o_first bigint)
   LANGUAGE plpgsql AS $fn$
   DECLARE
     n integer := coalesce(array_length(p_streams, 1), 0);
     v_head bigint;
     v_hash bytea;
     v_cur integer;
     v_exp text;
     v_cnt integer;
     v_e integer := 1;
     v_j integer;
     v_x integer;
     v_names text[];
     v_vers integer[];
     v_oks boolean[] := '{}';
     v_curs integer[] := '{}';
     v_firsts bigint[] := '{}';
     v_starts integer[] := '{}';
     v_hashes bytea[] := '{}';
     v_any boolean := false;
   BEGIN
     -- See migration 1 for why this lock, and READ COMMITTED, make positions gapless and in commit order. The
     -- chain's head is read under the same lock, so the links follow the positions.
     PERFORM pg_advisory_xact_lock(${APPEND_LOCK_CLASS}, hashtext(current_schema()));
     SELECT seq, hash INTO v_head, v_hash FROM chain_head WHERE id = 1;
     v_head := greatest(coalesce(v_head, 0), (SELECT coalesce(max(seq), 0) FROM events));
     v_hash := coalesce(v_hash, decode(repeat('00', 32), 'hex'));
     v_names := '{}';
     v_vers := '{}';
     FOR i IN 1 .. n LOOP
       v_cnt := p_counts[i];
       v_exp := p_expected[i];
       v_j := array_position(v_names, p_streams[i]);
       IF v_j IS NULL THEN
         SELECT coalesce(max(version), 0) INTO v_cur FROM events WHERE stream = p_streams[i];
         v_names := v_names || p_streams[i];
         v_vers := v_vers || v_cur;
         v_j := array_length(v_names, 1);
       END IF;
       v_cur := v_vers[v_j];
       v_starts[i] := v_e;
       v_curs[i] := v_cur;
       IF NOT (v_exp = 'any'
               OR (v_exp = 'no-stream' AND v_cur = 0)
               OR (v_exp = 'stream-exists' AND v_cur > 0)
               OR (v_exp NOT IN ('any', 'no-stream', 'stream-exists') AND v_exp::bigint = v_cur)) THEN
         v_oks[i] := false;
         v_firsts[i] := 0;
         o_ok := false; o_actual := v_cur; o_version := v_cur; o_first := 0;
       ELSE
         v_oks[i] := true;
         v_firsts[i] := v_head + 1;
         o_ok := true; o_actual := v_cur; o_version := v_cur + v_cnt;
         o_first := CASE WHEN v_cnt > 0 THEN v_head + 1 ELSE 0 END;
         -- Each event's link, in position order, over the bytes the server will store (the jsonb's text).
         FOR k IN 1 .. v_cnt LOOP
           v_x := v_e + k - 1;
           v_hash := event_hash(v_hash, v_head + k, p_streams[i], v_cur + k, p_types[v_x], p_schemas[v_x], p_at[v_x],
                                p_data[v_x]::jsonb::text, p_meta[v_x]::jsonb::text);
           v_hashes[v_x] := v_hash;
           v_any := true;
         END LOOP;
         v_head := v_head + v_cnt;
         v_vers[v_j] := v_cur + v_cnt; -- a later request on the same stream sees this one
       END IF;
       v_e := v_e + v_cnt;
       RETURN NEXT;
     END LOOP;
     INSERT INTO events (seq, stream, version, type, schema, data, meta, at, hash)
     SELECT v_firsts[i] + k - 1, p_streams[i], v_curs[i] + k, p_types[v_starts[i] + k - 1], p_schemas[v_starts[i] + k - 1],
            p_data[v_starts[i] + k - 1]::jsonb, p_meta[v_starts[i] + k - 1]::jsonb, p_at[v_starts[i] + k - 1], v_hashes[v_starts[i] + k - 1]
     FROM generate_series(1, n) AS i, generate_series(1, p_counts[i]) AS k
     WHERE v_oks[i];
     IF v_any THEN
       INSERT INTO chain_head (id, seq, hash) VALUES (1, v_head, v_hash)
       ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash;
     END IF;
   END
   $fn$;`,
  // 5: retention (postgres/archive.ts), as on SQLite (its migration 6). `archives`: each archive file written, with the
  // chain link it ends on. `tombstones`: an archived actor's last actors-projection row (the document stays in
  // projection_documents, so ps --all still lists it) and where its events went. `chain_gaps`: one row per hole
  // archiving left in the seqs (from_seq..seq), holding the hash of its last event, so the chain of the remaining
  // events stays checkable link by link and a hole no archive made is still damage. append_events already takes
  // the next position from chain_head (never max(seq) alone), so an archived tail never has its positions given
  // again: a reader following the global position sees positions only grow.
  `CREATE TABLE archives (
     id         bigserial PRIMARY KEY,
     file       text    NOT NULL,
     created_at text    NOT NULL,
     before     text    NOT NULL,
     actors     integer NOT NULL,
     events     bigint  NOT NULL,
     bytes      bigint  NOT NULL,
     sha256     text    NOT NULL,
     last_seq   bigint  NOT NULL,
     last_hash  bytea   NOT NULL
   );
   CREATE TABLE tombstones (
     stream     text    PRIMARY KEY,
     version    integer NOT NULL,
     archive    bigint  NOT NULL REFERENCES archives(id),
     first_seq  bigint  NOT NULL,
     last_seq   bigint  NOT NULL
   );
   CREATE INDEX tombstones_archive ON tombstones (archive);
   CREATE TABLE chain_gaps (
     seq      bigint PRIMARY KEY,
     from_seq bigint NOT NULL,
     hash     bytea  NOT NULL
   );
   -- Which version each stream's snapshot stands at, written in the append's transaction beside the snapshot
   -- (SQLite keeps it in actors.snapshot_version): a snapshot deleted later is noticed by verify
   -- (SNAPSHOT_MISSING) rather than just missed. The snapshots already there are recorded here.
   CREATE TABLE snapshot_versions (
     stream  text    PRIMARY KEY,
     version integer NOT NULL
   );
   INSERT INTO snapshot_versions SELECT stream, version FROM snapshots;`,
  // 6: the append function again, same contract, cheaper: store.pg.append measured migration 4's at 0.60 of a raw
  // INSERT; its time beyond the INSERT's (one event, commits not flushed) fell from about 410 to 200 µs here. Its
  // statements run generic plans (a custom plan was made on every call: the INSERT's cost estimate kept the plan
  // cache from ever switching), the head and the guard on max(seq) are one statement, the rows and the new head one
  // more, and each event's data and meta are parsed as jsonb once, not once for the link and again for the row.
  // The links are byte for byte migration 4's (the same event_hash over the same text): store-pg-chain checks it.
  `CREATE OR REPLACE FUNCTION append_events(
     p_streams text[], p_expected text[], p_counts integer[],
     p_types text[], p_schemas integer[], p_data text[], p_meta text[], p_at text[]
   ) RETURNS TABLE (o_ok boolean, o_actual integer, o_version integer, o_first bigint)
   LANGUAGE plpgsql
   SET plan_cache_mode = force_generic_plan
   AS $fn$
   DECLARE
     n integer := coalesce(array_length(p_streams, 1), 0);
     v_head bigint;
     v_hash bytea;
     v_cur integer;
     v_exp text;
     v_cnt integer;
     v_e integer := 1;
     v_j integer;
     v_x integer;
     v_names text[] := '{}';
     v_vers integer[] := '{}';
     v_oks boolean[] := '{}';
     v_curs integer[] := '{}';
     v_firsts bigint[] := '{}';
     v_starts integer[] := '{}';
     v_hashes bytea[] := '{}';
     v_data jsonb[] := '{}';
     v_meta jsonb[] := '{}';
   BEGIN
     -- See migration 1 for why this lock, and READ COMMITTED, make positions gapless and in commit order; the
     -- chain's head is read under it (its own statement: a statement's snapshot is taken before it waits).
     PERFORM pg_advisory_xact_lock(${APPEND_LOCK_CLASS}, hashtext(current_schema()));
     SELECT greatest(coalesce(h.seq, 0), (SELECT coalesce(max(seq), 0) FROM events)), coalesce(h.hash, decode(repeat('00', 32), 'hex'))
       INTO v_head, v_hash FROM (SELECT 1) AS one LEFT JOIN chain_head h ON h.id = 1;
     FOR i IN 1 .. n LOOP
       v_cnt := p_counts[i];
       v_exp := p_expected[i];
       v_j := array_position(v_names, p_streams[i]);
       IF v_j IS NULL THEN
         SELECT coalesce(max(version), 0) INTO v_cur FROM events WHERE stream = p_streams[i];
         v_names := v_names || p_streams[i];
         v_vers := v_vers || v_cur;
         v_j := array_length(v_names, 1);
       END IF;
       v_cur := v_vers[v_j];
       v_starts[i] := v_e;
       v_curs[i] := v_cur;
       IF NOT (v_exp = 'any'
               OR (v_exp = 'no-stream' AND v_cur = 0)
               OR (v_exp = 'stream-exists' AND v_cur > 0)
               OR (v_exp NOT IN ('any', 'no-stream', 'stream-exists') AND v_exp::bigint = v_cur)) THEN
         v_oks[i] := false;
         v_firsts[i] := 0;
         o_ok := false; o_actual := v_cur; o_version := v_cur; o_first := 0;
       ELSE
         v_oks[i] := true;
         v_firsts[i] := v_head + 1;
         o_ok := true; o_actual := v_cur; o_version := v_cur + v_cnt;
         o_first := CASE WHEN v_cnt > 0 THEN v_head + 1 ELSE 0 END;
         -- Each event's link, in position order, over the bytes the server stores (the jsonb's text); each
         -- jsonb is parsed once, for the link and the row.
         FOR k IN 1 .. v_cnt LOOP
           v_x := v_e + k - 1;
           v_data[v_x] := p_data[v_x]::jsonb;
           v_meta[v_x] := p_meta[v_x]::jsonb;
           v_hash := event_hash(v_hash, v_head + k, p_streams[i], v_cur + k, p_types[v_x], p_schemas[v_x], p_at[v_x],
                                v_data[v_x]::text, v_meta[v_x]::text);
           v_hashes[v_x] := v_hash;
         END LOOP;
         v_head := v_head + v_cnt;
         v_vers[v_j] := v_cur + v_cnt; -- a later request on the same stream sees this one
       END IF;
       v_e := v_e + v_cnt;
       RETURN NEXT;
     END LOOP;
     IF v_hashes <> '{}' THEN
       -- The rows and the new head in one statement (a data-modifying WITH always runs to completion).
       WITH ins AS (
         INSERT INTO events (seq, stream, version, type, schema, data, meta, at, hash)
         SELECT v_firsts[i] + k - 1, p_streams[i], v_curs[i] + k, p_types[v_starts[i] + k - 1], p_schemas[v_starts[i] + k - 1],
                v_data[v_starts[i] + k - 1], v_meta[v_starts[i] + k - 1], p_at[v_starts[i] + k - 1], v_hashes[v_starts[i] + k - 1]
         FROM generate_series(1, n) AS i, generate_series(1, p_counts[i]) AS k
         WHERE v_oks[i]
       )
       INSERT INTO chain_head (id, seq, hash) VALUES (1, v_head, v_hash)
       ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash;
     END IF;
   END
   $fn$;`,
  // 7: one event to one stream, the most common append (appendToStream, most of the actor host's appends), gets a
  // function of its own with scalar arguments: the same lock, rule, link and head as append_events, without its
  // eight array arguments to parse or its loops. Measured here (one event, commits not flushed) it costs about
  // 80 µs beyond a raw INSERT where append_events costs about 120.
  //
  // The head comes from chain_head alone when its row is there: every append since migration 4 moves chain_head in
  // the transaction that writes its rows and nothing else writes events, so it is never behind max(seq); max(seq)
  // is read only when the row is missing (COALESCE does not evaluate the subquery otherwise), which still keeps
  // positions from being given twice.
  `CREATE FUNCTION append_event(
     p_stream text, p_expected text, p_type text, p_schema integer, p_data text, p_meta text, p_at text
   ) RETURNS TABLE (o_ok boolean, o_actual integer, o_version integer, o_first bigint)
   LANGUAGE plpgsql
   SET plan_cache_mode = force_generic_plan
   AS $fn$
   DECLARE
     v_head bigint;
     v_hash bytea;
     v_cur integer;
     v_data jsonb;
     v_meta jsonb;
   BEGIN
     -- Migration 1 says why this lock and READ COMMITTED; the head and the stream's version are read under it, in
     -- a statement of their own (a statement's snapshot is taken before it waits).
     PERFORM pg_advisory_xact_lock(${APPEND_LOCK_CLASS}, hashtext(current_schema()));
     SELECT coalesce(h.seq, (SELECT coalesce(max(seq), 0) FROM events)), coalesce(h.hash, decode(repeat('00', 32), 'hex')),
            (SELECT coalesce(max(version), 0) FROM events WHERE stream = p_stream)
       INTO v_head, v_hash, v_cur FROM (SELECT 1) AS one LEFT JOIN chain_head h ON h.id = 1;
     o_actual := v_cur;
     IF NOT (p_expected = 'any'
             OR (p_expected = 'no-stream' AND v_cur = 0)
             OR (p_expected = 'stream-exists' AND v_cur > 0)
             OR (p_expected NOT IN ('any', 'no-stream', 'stream-exists') AND p_expected::bigint = v_cur)) THEN
       o_ok := false; o_version := v_cur; o_first := 0;
       RETURN NEXT;
       RETURN;
     END IF;
     -- The link over the bytes the server stores (the jsonb's text), each jsonb parsed once.
     v_data := p_data::jsonb;
     v_meta := p_meta::jsonb;
     v_hash := event_hash(v_hash, v_head + 1, p_stream, v_cur + 1, p_type, p_schema, p_at, v_data::text, v_meta::text);
     WITH ins AS (
       INSERT INTO events (seq, stream, version, type, schema, data, meta, at, hash)
       VALUES (v_head + 1, p_stream, v_cur + 1, p_type, p_schema, v_data, v_meta, p_at, v_hash)
     )
     INSERT INTO chain_head (id, seq, hash) VALUES (1, v_head + 1, v_hash)
     ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash;
     o_ok := true; o_version := v_cur + 1; o_first := v_head + 1;
     RETURN NEXT;
   END
   $fn$;`,
  // 8: the end of a fenced or projected append (postgres/append.ts) in one statement, sent with its COMMIT in one query
  // string: the global append lock (taken inside append_events) is held only while the server runs this and
  // commits, never while the client could stop between two statements. Everything the client decided before (its
  // lease rows and its streams' and documents' locks held since) comes in one json argument: the requests with
  // their expected versions pinned to what the transaction read, whether each is predicted to match, the folded
  // projection documents, the snapshots, the claimed leases to give back. A request that does not come out as
  // predicted (an append that took no stream lock changed the stream meanwhile) fails the statement with a
  // serialization failure (40001): nothing is written, and the store runs the transaction again.
  `CREATE FUNCTION rl_texts(j json) RETURNS text[] LANGUAGE sql IMMUTABLE AS
     $$ SELECT coalesce(array_agg(x ORDER BY n), '{}') FROM json_array_elements_text(j) WITH ORDINALITY AS t(x, n) $$;
   CREATE FUNCTION append_commit(p json) RETURNS TABLE (o_ok boolean, o_actual integer, o_version integer, o_first bigint)
   LANGUAGE plpgsql AS $fn$
   DECLARE
     r record;
     i integer := 0;
     v_pred text[] := rl_texts(p->'predicted');
     s json;
   BEGIN
     FOR r IN SELECT * FROM append_events(rl_texts(p->'streams'), rl_texts(p->'expected'), rl_texts(p->'counts')::integer[],
                                          rl_texts(p->'types'), rl_texts(p->'schemas')::integer[], rl_texts(p->'data'),
                                          rl_texts(p->'meta'), rl_texts(p->'at')) LOOP
       i := i + 1;
       IF r.o_ok::text <> v_pred[i] THEN
         RAISE EXCEPTION 'append % to % did not come out as its transaction read it (another append changed the stream)', ` +
    `i, (p->'streams'->>(i - 1))
           USING ERRCODE = '40001';
       END IF;
       o_ok := r.o_ok; o_actual := r.o_actual; o_version := r.o_version; o_first := r.o_first;
       RETURN NEXT;
     END LOOP;
     INSERT INTO projection_documents (projection, id, doc)
       SELECT x, y, z::jsonb FROM unnest(rl_texts(p->'put_p'), rl_texts(p->'put_i'), rl_texts(p->'put_d')) AS u(x, y, z)
     ON CONFLICT (projection, id) DO UPDATE SET doc = excluded.doc;
     DELETE FROM projection_documents d USING unnest(rl_texts(p->'del_p'), rl_texts(p->'del_i')) AS k(x, y) ` +
    `WHERE d.projection = k.x AND d.id = k.y;
     DELETE FROM leases l USING unnest(rl_texts(p->'unclaimed'), rl_texts(p->'unclaimed_tokens')::bigint[]) AS h(stream, token)
       WHERE l.stream = h.stream AND l.token = h.token;
     -- One snapshot at a time (two of one stream in a batch: one after the other); the one replaced moves to history.
     FOR s IN SELECT * FROM json_array_elements(p->'snapshots') LOOP
       INSERT INTO snapshot_history SELECT * FROM snapshots WHERE stream = s->>'stream' AND version < (s->>'version')::integer
       ON CONFLICT (stream, version) DO UPDATE SET fingerprint = excluded.fingerprint, created_at = excluded.created_at, ` +
    `state = excluded.state, checksum = excluded.checksum;
       INSERT INTO snapshots (stream, version, fingerprint, created_at, state, checksum)
       VALUES (s->>'stream', (s->>'version')::integer, s->>'fingerprint', s->>'createdAt', s->>'state', s->>'checksum')
       ON CONFLICT (stream) DO UPDATE SET version = excluded.version, fingerprint = excluded.fingerprint, ` +
    `created_at = excluded.created_at, state = excluded.state, checksum = excluded.checksum;
       INSERT INTO snapshot_versions (stream, version) VALUES (s->>'stream', (s->>'version')::integer)
       ON CONFLICT (stream) DO UPDATE SET version = excluded.version;
     END LOOP;
     PERFORM pg_notify(p->>'channel', '');
   END
   $fn$;`,
  // 9: an archive's removal (postgres/archive.ts) and a projection's rebuild (pg-rebuild.ts), each one statement run on
  // its own (its own transaction): the global append lock is held only while the server runs it and commits, never
  // while the client could stop between two statements. archive_remove checks that no archived stream moved,
  // records the archive and its tombstones, deletes the streams' events and snapshots and records the chain's
  // holes; a stream that moved since the plan: nothing is written, and it comes back as (null, stream, version).
  `CREATE FUNCTION archive_remove(p json) RETURNS TABLE (o_archive bigint, o_stream text, o_version integer)
   LANGUAGE plpgsql AS $fn$
   DECLARE
     v_streams text[] := rl_texts(p->'streams');
     v_versions integer[] := rl_texts(p->'versions')::integer[];
   BEGIN
     PERFORM pg_advisory_xact_lock(${APPEND_LOCK_CLASS}, hashtext(current_schema()));
     SELECT h.s, coalesce(e.v, 0) INTO o_stream, o_version
       FROM unnest(v_streams, v_versions) AS h(s, want)
       LEFT JOIN (SELECT stream, max(version) AS v FROM events WHERE stream = ANY (v_streams) GROUP BY stream) e ON e.stream = h.s
       WHERE coalesce(e.v, 0) <> h.want LIMIT 1;
     IF FOUND THEN
       RETURN NEXT;
       RETURN;
     END IF;
     o_stream := NULL; o_version := NULL;
     INSERT INTO archives (file, created_at, before, actors, events, bytes, sha256, last_seq, last_hash)
       VALUES (p->>'file', p->>'createdAt', p->>'before', (p->>'actors')::integer, (p->>'events')::bigint, (p->>'bytes')::bigint,
               p->>'sha256', (p->>'lastSeq')::bigint, decode(p->>'lastHash', 'hex'))
       RETURNING id INTO o_archive;
     INSERT INTO tombstones (stream, version, archive, first_seq, last_seq)
       SELECT s, v, o_archive, f, l FROM unnest(v_streams, v_versions, rl_texts(p->'first')::bigint[], ` +
    `rl_texts(p->'last')::bigint[]) AS u(s, v, f, l);
     DELETE FROM events WHERE stream = ANY (v_streams);
     DELETE FROM snapshots WHERE stream = ANY (v_streams);
     DELETE FROM snapshot_history WHERE stream = ANY (v_streams);
     DELETE FROM snapshot_versions WHERE stream = ANY (v_streams);
     -- The ps row stays; the machine snapshot the next event would fold into goes (an ended actor has none).
     UPDATE projection_documents SET doc = doc - 'snapshot' - 'rev' WHERE projection = p->>'projection' AND id = ANY (v_streams);
     DELETE FROM chain_gaps WHERE seq = ANY (rl_texts(p->'swallowed')::bigint[]);
     -- Each hole runs from just after the last event still in the log before its end.
     INSERT INTO chain_gaps (seq, from_seq, hash)
       SELECT e, (SELECT coalesce(max(seq), 0) FROM events WHERE seq < e) + 1, decode(h, 'hex')
       FROM unnest(rl_texts(p->'holeEnds')::bigint[], rl_texts(p->'holeHashes')) AS u(e, h)
     ON CONFLICT (seq) DO UPDATE SET from_seq = excluded.from_seq, hash = excluded.hash;
     RETURN NEXT;
   END
   $fn$;
   -- A projection's documents replaced by those folded from the log up to p.head (pg-rebuild.ts), under the append
   -- lock, if the head and the archives are still what the fold read; false (nothing changed) if not.
   CREATE FUNCTION projection_replace(p json) RETURNS boolean
   LANGUAGE plpgsql AS $fn$
   BEGIN
     PERFORM pg_advisory_xact_lock(${APPEND_LOCK_CLASS}, hashtext(current_schema()));
     IF coalesce((SELECT seq FROM chain_head WHERE id = 1), (SELECT coalesce(max(seq), 0) FROM events)) <> (p->>'head')::bigint
        OR (SELECT coalesce(max(id), 0) FROM archives) <> (p->>'archives')::bigint THEN
       RETURN false;
     END IF;
     DELETE FROM projection_documents WHERE projection = p->>'projection';
     INSERT INTO projection_documents (projection, id, doc)
       SELECT p->>'projection', i, d::jsonb FROM unnest(rl_texts(p->'ids'), rl_texts(p->'docs')) AS u(i, d);
     RETURN true;
   END
   $fn$;`,
  // 10: what a supervisor's open reads without reading the history (postgres/open-reads.ts), so that its cost does
  // not grow with the ended actors in the log: the actors that have not ended (their rows), and the streams that
  // are no actor's (app grants, facts, the request streams), each found through a partial index of its own. A row
  // or an event outside either predicate never enters these indexes, so appends to ended actors' rows and actors'
  // events pay no more than the predicate's check.
  `CREATE INDEX projection_documents_unended ON projection_documents (projection, id)
     WHERE (doc->>'status') <> 'terminal';
   CREATE INDEX events_unowned ON events (stream, seq)
     WHERE ${UNOWNED_EVENTS};`,
];

export const PG_LATEST_SCHEMA = PG_MIGRATIONS.length;
