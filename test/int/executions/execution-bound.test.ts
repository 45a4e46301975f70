// The operator policy's executions.maxRunning on one supervisor (SQLite): 6 executions sent at once with a bound of
// 2 never have more than 2 sandboxes running at once (counted from Docker's own start/die events), and all 6 answer.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { parseOperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  watchContainerEvents,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';
import { publishCodeSource, publishNodeRuntime, startTestPds, type TestPds } from '../../support/pds.ts';

const BOUND = 2;
/** The handler waits a little, so executions let in together would overlap. */
const SLOW = `export async function nap(input) { await new Promise((r) => setTimeout(r, 400)); return { n: input.n }; }\n`;

let pds: TestPds;
let rl: Runlog;
let home: string;
let root: string;
let uri: string;

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  pds = await startTestPds();
  root = mkdtempSync(join(tmpdir(), 'runlog-bound-'));
  uri = await publishCodeSource(pds, 'bound.test', root, await publishNodeRuntime(pds, 'runtimes.test'), SLOW);
  home = join(root, 'home');
  // No pre-started sandboxes: every sandbox counted is one an execution made for itself.
  const policy = parseOperatorPolicy({
    executions: { maxRunning: BOUND, maxQueued: 16 },
    prestart: { perCode: 0, total: 0 },
  });
  rl = await createRunlog({
    home,
    policy,
    atproto: { plcUrl: pds.plcUrl },
    labels: { ...TEST_LABELS },
    log: () => undefined,
  });
}, 240_000);

afterAll(async () => {
  await rl?.close();
  await pds?.close();
  await cleanupTestContainers();
  await cleanupTestVolumes();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('executions.maxRunning on one supervisor', () => {
  it(`6 executions at once with a bound of ${BOUND}: all succeed, never more than ${BOUND} sandboxes running at once`, async () => {
    const watch = await watchContainerEvents();
    const outs = await Promise.all(
      Array.from({ length: 6 }, (_, n) => rl.execute({ uri, handler: 'nap', input: { n }, timeoutMs: 60_000 })),
    );
    expect(outs.map((o) => [o.status, o.output])).toEqual(Array.from({ length: 6 }, (_, n) => ['succeeded', { n }]));
    await rl.idle();
    await watch.settled();
    watch.stop();
    const events = watch.events({ 'runlog.home': home, 'runlog.kind': 'execution' });
    let running = 0;
    let most = 0;
    for (const e of events) {
      if (e.action === 'start') most = Math.max(most, ++running);
      if (e.action === 'die') running -= 1;
    }
    expect(events.filter((e) => e.action === 'start')).toHaveLength(6);
    expect(most).toBeGreaterThanOrEqual(1);
    expect(most).toBeLessThanOrEqual(BOUND);
  }, 180_000);
});
