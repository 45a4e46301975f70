// The one place better-sqlite3 is loaded for runlog's own files. It turns on SQLite's URI filenames before
// the native addon loads (the addon reads SQLITE_USE_URI once, at its first open), because inspection opens
// a log with no write-ahead log as `file:<path>?immutable=1`: the only way SQLite reads a database without
// creating `-wal`/`-shm` files next to it (a read-only copy, a directory the reader cannot write, a log owned
// by another user). Plain paths are unaffected: runlog passes absolute paths, and only names starting with
// `file:` are parsed as URIs.
process.env.SQLITE_USE_URI = '1';

export { default as Database } from 'better-sqlite3';

/** A `file:` URI for SQLite: the path percent-encoded where SQLite's URI parser would misread it. */
export function sqliteUri(path: string, params: Record<string, string>): string {
  const encoded = path.replace(/[%?#]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  const query = Object.entries(params)
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  return `file:${encoded}${query ? `?${query}` : ''}`;
}
