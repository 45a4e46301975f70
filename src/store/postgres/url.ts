// runlog's PostgreSQL store URLs: postgres://… with an optional `?schema=` that names the log's schema.
import { RunlogError } from '../../domain/errors.ts';

/** `?schema=name` in a runlog store URL names the schema; node-postgres must not see it. */
export function splitStoreUrl(url: string): { url: string; schema: string | undefined } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new RunlogError('STORE_INPUT', 'the store URL is not a valid postgres:// URL', { url: '(unparsable)' });
  }
  const schema = u.searchParams.get('schema') ?? undefined;
  u.searchParams.delete('schema');
  return { url: u.toString(), schema };
}

/** A PostgreSQL URL (postgres:// or postgresql://) rather than a SQLite file. */
export function isPostgresUrl(store: string | undefined): store is string {
  return typeof store === 'string' && /^postgres(ql)?:\/\//i.test(store);
}
