// Opening a PostgreSQL event store: migrations run once (even with two openers racing), a schema that belongs to
// another program or to a newer runlog is refused and left as it was, and an unreachable server is a typed error.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { PgEventStore } from '../../../src/store/postgres/event-store.ts';
import { PG_LATEST_SCHEMA } from '../../../src/store/postgres/schema.ts';
import { testSchema, usePostgres } from '../../support/postgres.ts';

const db = usePostgres();

describe('opening a PostgreSQL event store', () => {
  it('creates and migrates a new schema once, even when two open it at the same time; sessions commit synchronously', async () => {
    const schema = testSchema('open');
    const [a, b] = await Promise.all([
      PgEventStore.open({ url: db.url, schema }),
      PgEventStore.open({ url: db.url, schema }),
    ]);
    try {
      const { rows } = await db.admin.query(`SELECT application, version FROM ${schema}.runlog_schema`);
      expect(rows).toEqual([{ application: 'runlog-event-log', version: PG_LATEST_SCHEMA }]);
      await a.appendToStream('s-1', [{ type: 'x', data: {} }], { expectedVersion: 'no-stream' });
      expect(await b.streamVersion('s-1')).toBe(1);
      const setting = await (a as unknown as { pool: pg.Pool }).pool.query(
        "SELECT current_setting('synchronous_commit') AS sc, current_setting('transaction_isolation') AS iso",
      );
      expect(setting.rows[0]).toEqual({ sc: 'on', iso: 'read committed' });
    } finally {
      await a.close();
      await b.close();
    }
    // Reopening an up-to-date log changes nothing.
    const again = await PgEventStore.open({ url: db.url, schema });
    expect(await again.lastSeq()).toBe(1);
    await again.close();
  });

  it('refuses a schema that holds another program’s tables, and leaves it as it was', async () => {
    const schema = testSchema('foreign');
    await db.admin.query(
      `CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.orders (id int); INSERT INTO ${schema}.orders VALUES (7)`,
    );
    await expect(PgEventStore.open({ url: db.url, schema })).rejects.toMatchObject({ code: 'STORE_FOREIGN' });
    const tables = await db.admin.query('SELECT tablename FROM pg_tables WHERE schemaname = $1', [schema]);
    expect(tables.rows).toEqual([{ tablename: 'orders' }]);
    expect((await db.admin.query(`SELECT id FROM ${schema}.orders`)).rows).toEqual([{ id: 7 }]);
  });

  it('refuses a log written by a newer runlog', async () => {
    const schema = testSchema('newer');
    await (await PgEventStore.open({ url: db.url, schema })).close();
    await db.admin.query(`UPDATE ${schema}.runlog_schema SET version = 99`);
    await expect(PgEventStore.open({ url: db.url, schema })).rejects.toMatchObject({ code: 'STORE_TOO_NEW' });
  });

  it('a server that does not answer is STORE_UNAVAILABLE, saying how to start it', async () => {
    const err = await PgEventStore.open({
      url: 'postgres://runlog:secret@127.0.0.1:1/runlog',
      schema: testSchema('down'),
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(String((err as Error).message)).toContain('npm run setup');
    expect(String((err as Error).message)).not.toContain('secret');
  });

  it('rejects a schema name that is not a plain identifier before connecting', async () => {
    await expect(PgEventStore.open({ url: db.url, schema: 'x; DROP TABLE y' })).rejects.toMatchObject({
      code: 'STORE_INPUT',
    });
  });
});
