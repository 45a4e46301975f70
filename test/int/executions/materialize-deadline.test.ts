// The execution's deadline holds while its runtime is copied for the first time: with the runtime's download
// held back by a slow Docker socket, an execution with a 3 s timeout answers TIMEOUT (reason timeout) by its
// deadline, not when the copy ends; the copy finishes in the background and the next execution runs on it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishCode } from '../../../src/supervisor/executions/publishing.ts';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { DEFAULT_ARCHIVE_LIMITS } from '../../../src/domain/at-run/archive-limits.ts';
import { parseOperatorPolicy } from '../../../src/domain/at-run/operator-policy.ts';
import { startDockerDelayProxy, type DockerDelayProxy } from '../../support/docker-delay-proxy.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';
import { publishNodeRuntime, startTestPds, type TestPds } from '../../support/pds.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const TIMEOUT_MS = 3000;
/** How long the runtime's first download is held back: well past the deadline. */
const HELD_MS = 10_000;
/** What the answer may take past the deadline (the outcome's append, the effect's bookkeeping). */
const MARGIN_MS = 2000;

let pds: TestPds;
let proxy: DockerDelayProxy;
let rl: Runlog;
let root: string;
let uri: string;

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  pds = await startTestPds();
  const runtimeUri = await publishNodeRuntime(pds, 'runtimes.test');
  const alice = await pds.createAccount('alice.test');
  uri = (
    await publishCode(alice.publisher, {
      dir: join(REPO, 'examples/greet-node'),
      runtime: runtimeUri,
      atproto: { plcUrl: pds.plcUrl },
    })
  ).uri;
  root = mkdtempSync(join(tmpdir(), 'runlog-mat-deadline-'));
  // The first download of a container's files is the runtime's export (code is uploaded, never downloaded).
  proxy = await startDockerDelayProxy(
    (line) => line.startsWith('GET ') && line.includes('/archive?') && proxy.held.length === 0,
    HELD_MS,
  );
  // Archive limits of their own make the runtime's volume this test's alone: its first copy is a cold one.
  const policy = parseOperatorPolicy({
    archive: { maxEntries: DEFAULT_ARCHIVE_LIMITS.maxEntries - 1 - (process.pid % 997) },
    prestart: { perCode: 0, total: 0 },
  });
  rl = await createRunlog({
    home: join(root, 'home'),
    policy,
    parts: { dockerSocket: proxy.socketPath },
    atproto: { plcUrl: pds.plcUrl },
    labels: { ...TEST_LABELS },
    log: () => undefined,
  });
}, 240_000);

afterAll(async () => {
  await rl?.close();
  await proxy?.close();
  await pds?.close();
  await cleanupTestContainers();
  await cleanupTestVolumes();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('a deadline during a cold runtime copy', () => {
  it('the execution answers TIMEOUT by its deadline; the copy goes on and the next execution succeeds on it', async () => {
    const sentAt = Date.now();
    const late = await rl.execute({ uri, handler: 'greet', input: { name: 'Ada' }, timeoutMs: TIMEOUT_MS });
    const answeredAt = Date.now();
    expect(proxy.held).toHaveLength(1);
    expect(late.status).toBe('failed');
    expect(late.failure).toMatchObject({
      reason: 'timeout',
      code: 'TIMEOUT',
      message: expect.stringMatching(/during the runtime copy/),
    });
    expect(answeredAt - sentAt).toBeLessThan(TIMEOUT_MS + MARGIN_MS);

    const next = await rl.execute({ uri, handler: 'greet', input: { name: 'Grace' }, timeoutMs: 60_000 });
    expect(next.failure).toBeUndefined();
    expect(next.output).toMatchObject({ greeting: 'Hello, Grace!' });
    expect(proxy.held).toHaveLength(1);
  }, 180_000);
});
