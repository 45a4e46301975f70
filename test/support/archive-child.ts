// A process that runs one archive (test/int/store/retention-kill.test.ts) and stops dead at a named step: it says so on stderr
// and waits there to be killed with SIGKILL. Usage: archive-child.ts <db> <home> <before> <out> <step>
import { archiveLog } from '../../src/supervisor/retention/retention.ts';
import { SqlitePortStore } from '../../src/store/sqlite/port-adapter.ts';
import { WriterLock } from '../../src/store/sqlite/writer-lock.ts';
import { stopDeadAt } from './stop-at-step.ts';

const [db, home, before, out, stopAt] = process.argv.slice(2) as [string, string, string, string, string];
const lock = WriterLock.acquire(db, 'archive-child');
const store = new SqlitePortStore(db);
const result = await archiveLog(store, {
  before,
  home,
  out,
  onStep: stopDeadAt(stopAt),
});
await store.close();
lock.release();
process.stdout.write(`${JSON.stringify(result)}\n`);
