// A process that runs one archive on a PostgreSQL log (test/int/postgres/retention-pg.test.ts) and stops dead at a named step:
// it says so on stderr and waits there to be killed with SIGKILL (its connection, with its locks and any open
// transaction, dies with it). Usage: pg-archive-child.ts <store-url> <home> <before> <out> <step>
import { archiveStoreUrl } from '../../src/supervisor/retention/retention.ts';
import { stopDeadAt } from './stop-at-step.ts';

const [url, home, before, out, stopAt] = process.argv.slice(2) as [string, string, string, string, string];
const result = await archiveStoreUrl(url, {
  before,
  home,
  out,
  onStep: stopDeadAt(stopAt),
});
process.stdout.write(`${JSON.stringify(result)}\n`);
