// Helpers for integration tests against the real PostgreSQL server that `npm run setup` starts. They never
// skip: when nothing answers, the test FAILS saying how to start it. Each test run gets schemas of its own
// (random names, dropped afterwards), so concurrent runs never see each other's events.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';

const SETUP_DIR = process.env.RUNLOG_SETUP_DIR ?? '/var/lib/runlog-setup';

/** RUNLOG_PG_URL from the environment, else from the setup's env file, else the setup's default. */
export function pgUrl(): string {
  if (process.env.RUNLOG_PG_URL) return process.env.RUNLOG_PG_URL;
  const envFile = `${SETUP_DIR}/env`;
  if (existsSync(envFile)) {
    const m = /^RUNLOG_PG_URL=(.+)$/m.exec(readFileSync(envFile, 'utf8'));
    if (m) return m[1]!.trim();
  }
  return 'postgres://runlog:runlog@127.0.0.1:5432/runlog';
}

/** Fails unless PostgreSQL answers at pgUrl(). */
export async function requirePostgres(): Promise<string> {
  const url = pgUrl();
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new Error(
      `PostgreSQL not answering at ${url.replace(/:[^:@/]*@/, ':***@')} — run \`npm run setup\` ` +
        `(it installs and starts PostgreSQL on 127.0.0.1:5432) (${(err as Error).message})`,
    );
  } finally {
    await client.end().catch(() => {});
  }
  return url;
}

/** A fresh schema name for this run; dropSchemas() removes every one handed out. */
const made: string[] = [];
export function testSchema(tag = 'contract'): string {
  const name = `rltest_${tag}_${process.pid}_${randomBytes(4).toString('hex')}`;
  made.push(name);
  return name;
}

export async function dropSchemas(url: string): Promise<void> {
  if (made.length === 0) return;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const s of made.splice(0)) await client.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  } finally {
    await client.end();
  }
}

/** The server a test file talks to: its URL and an admin connection for reading and damaging a log directly. */
export interface PostgresForTests {
  readonly url: string;
  readonly admin: pg.Client;
}

/**
 * Called once at a test file's top level: before its tests, requires the server and connects an admin client;
 * after them, ends that client and drops every schema testSchema() handed out. The fields are read in tests (set
 * by the before-hook). Its after-hook is registered here, so with vitest's stacked after-hooks it runs after those
 * the file registers later (a file closing its own stores has them closed before their schemas go).
 */
export function usePostgres(): PostgresForTests {
  let url = '';
  let admin: pg.Client | undefined;
  beforeAll(async () => {
    url = await requirePostgres();
    admin = new pg.Client({ connectionString: url });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.end();
    if (url) await dropSchemas(url);
  });
  return {
    get url() {
      return url;
    },
    get admin() {
      if (!admin) throw new Error('usePostgres(): the admin client is connected in beforeAll; read it inside a test');
      return admin;
    },
  };
}
