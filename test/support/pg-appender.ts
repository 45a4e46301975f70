// Another process appending to a PostgreSQL log through the real host (test/int/postgres/retention-pg.test.ts): it spawns
// instances and ends them, one after another, until SIGTERM, then prints how many it created (each 3 events).
// Usage: pg-appender.ts <store-url> <home> <prefix>
import { createRunlog } from '../../src/supervisor/runlog.ts';
import { runlogInternals } from '../../src/supervisor/runlog-internals.ts';

const [store, home, prefix] = process.argv.slice(2) as [string, string, string];
const rl = await createRunlog({ home, store, supervise: false, readOnly: false });
let stop = false;
process.on('SIGTERM', () => (stop = true));
const spec = (id: string) => ({
  instanceId: id,
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 10, maxBackoffMs: 20, resetAfterMs: 1000 },
});
let n = 0;
while (!stop) {
  const id = `${prefix}${String(n).padStart(5, '0')}`;
  await runlogInternals(rl).host.create('instance', id, {
    type: 'instance.requested',
    data: { spec: spec(id) },
  } as never);
  await rl.send('instance', id, { type: 'instance.stop-requested', data: {} } as never);
  await rl.send('instance', id, { type: 'instance.exited', data: { exitCode: 0 } } as never);
  n += 1;
  if (n === 1) process.stderr.write('appending\n');
}
await rl.close();
process.stdout.write(`${n}\n`);
