// The retention specs on SQLite (specs.ts).
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { SqlitePortStore } from '../../../src/store/sqlite/port-adapter.ts';
import { retentionSpecs } from './specs.ts';

retentionSpecs('SQLite', {
  newLog: (home) => {
    const db = join(home, 'runlog.db');
    return Promise.resolve({
      log: {
        where: ['--home', home],
        read: async (fn) => {
          const s = new SqlitePortStore(db, { readOnly: true });
          try {
            return await fn(s);
          } finally {
            await s.close();
          }
        },
        deleteSnapshot: (stream) => {
          const raw = new Database(db);
          try {
            raw.prepare('DELETE FROM snapshots WHERE stream = ?').run(stream);
          } finally {
            raw.close();
          }
          return Promise.resolve();
        },
      },
    });
  },
});
