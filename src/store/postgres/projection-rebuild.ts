// Rebuilding a projection of a PostgreSQL log: the whole log folded again, a page at a time, in one transaction
// that holds the append lock, so the documents are exact as of its commit.
import type pg from 'pg';
import { toJson } from '../port.ts';
import { foldDocument, type ProjectionTarget } from '../projection-set.ts';
import { checkout, translate } from './connection.ts';
import { APPEND_LOCK_CLASS } from './pg-schema.ts';

const PAGE = 1000;
const COLUMNS = 'seq, stream, version, type, schema, data, meta, at';

export async function rebuildProjection<R extends { seq: number }>(pool: pg.Pool, description: string, name: string, targetsOf: (rows: R[]) => Iterable<ProjectionTarget>): Promise<{ documents: number; events: number }> {
  const { client, release } = await checkout(pool).catch((err: unknown) => {
    throw translate(description, err);
  });
  let broken = false;
  try {
    await client.query('BEGIN');
    // Appends wait while the projection is rebuilt: it is exact as of the commit.
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))', [APPEND_LOCK_CLASS]);
    const docs = new Map<string, unknown>();
    let events = 0;
    let from = 1;
    for (;;) {
      const rows = (await client.query<R>(`SELECT ${COLUMNS} FROM events WHERE seq >= $1 ORDER BY seq LIMIT ${PAGE}`, [from])).rows;
      for (const t of targetsOf(rows)) docs.set(t.id, foldDocument(t, docs.get(t.id) ?? null));
      events += rows.length;
      if (rows.length < PAGE) break;
      from = rows.at(-1)!.seq + 1;
    }
    await client.query('DELETE FROM projection_documents WHERE projection = $1', [name]);
    const live = [...docs].filter(([, d]) => d !== null);
    if (live.length > 0) {
      await client.query('INSERT INTO projection_documents (projection, id, doc) SELECT $1, i, d::jsonb FROM unnest($2::text[], $3::text[]) AS u(i, d)', [
        name,
        live.map(([id]) => id),
        live.map(([id, d]) => toJson(d, `projection ${name} document ${id}`)),
      ]);
    }
    await client.query('COMMIT');
    return { documents: live.length, events };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => (broken = true));
    throw translate(description, err);
  } finally {
    release(broken);
  }
}