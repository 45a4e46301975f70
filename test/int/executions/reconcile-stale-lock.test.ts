// The reconciler removes the `<volume>-lock` container of a materialization whose holder is gone, and leaves a live
// holder's alone (supervisor/recovery/strays.ts strayContainers, adapters/docker/materialize-lock.ts): real Docker Engine,
// registry image, a real holder process (support/materialize-child.ts) killed with SIGKILL mid-copy, and
// `runlog reconcile` as a separate process on a home whose label the locks carry (as a supervisor's materializer
// labels them). The live holder is this test process, holding a lock of another volume through the same code.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeArchive } from '../../../src/adapters/archive/index.ts';
import type { DockerEngine } from '../../../src/adapters/docker/docker-port.ts';
import { createDockerEngine } from '../../../src/adapters/docker/dockerode-engine.ts';
import { LABEL_LOCK_FOR, LOCK_KIND, VolumeLocks } from '../../../src/adapters/docker/materialize-lock.ts';
import { DEFAULT_ARCHIVE_LIMITS } from '../../../src/domain/at-run/archive-limits.ts';
import { runCli } from '../../support/cli-process.ts';
import {
  cleanupTestContainers,
  cleanupTestVolumes,
  imageRef,
  requireDocker,
  requireRegistry,
  TEST_LABELS,
} from '../../support/docker.ts';

const RUN = `stale-lock-${process.pid}-${Date.now()}`;
const CHILD = join(import.meta.dirname, '../../support/materialize-child.ts');
const home = mkdtempSync(join(tmpdir(), 'runlog-stale-lock-'));
const LABELS = { ...TEST_LABELS, 'runlog.test-run': RUN, 'runlog.home': home };

let engine: DockerEngine;
let runtime: string;

beforeAll(async () => {
  await requireDocker();
  await requireRegistry();
  runtime = imageRef('runtime-node');
  engine = createDockerEngine();
});

afterAll(async () => {
  if (engine) {
    await cleanupTestContainers({ ...TEST_LABELS, 'runlog.test-run': RUN });
    await cleanupTestVolumes({ ...TEST_LABELS, 'runlog.test-run': RUN });
  }
  rmSync(home, { recursive: true, force: true });
});

/** A materialization in a child process, held after its upload (its lock taken, its volume not sealed). */
async function holderKilledMidCopy(): Promise<void> {
  const text = `export const id = '${randomBytes(8).toString('hex')}';\n`;
  const codeFile = join(home, 'code.tar');
  writeFileSync(
    codeFile,
    await writeArchive([
      { path: 'main.mjs', type: 'file', mode: 0o644, size: Buffer.byteLength(text), data: Buffer.from(text) },
    ]),
  );
  const req = {
    kind: 'code',
    image: runtime,
    codeFile,
    labels: LABELS,
    maxEntries: DEFAULT_ARCHIVE_LIMITS.maxEntries,
    holdAt: 'upload:done',
  };
  const proc = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(req)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()));
  let err = '';
  await new Promise<void>((resolve, reject) => {
    proc.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      const lines = err.split('\n');
      if (lines.includes('ready') && !err.includes('go-sent')) {
        err += 'go-sent\n';
        proc.stdin.write('go\n');
      }
      if (lines.includes('at upload:done')) resolve();
    });
    void exited.then(() => reject(new Error(`the holder exited before holding its lock; stderr:\n${err}`)));
  });
  proc.kill('SIGKILL');
  await exited;
}

describe('the reconciler and materialization locks', () => {
  it('removes the lock of a holder that is gone and keeps a live holder’s', { timeout: 300_000 }, async () => {
    await holderKilledMidCopy();
    const [dead] = await engine.listContainers({ 'runlog.test-run': RUN, 'runlog.kind': LOCK_KIND }, { all: true });
    expect(dead, 'the killed holder left its lock').toBeDefined();

    // A live holder: this process, through the same lock code, on a volume of its own.
    const liveVolume = `runlog-test-live-${randomBytes(6).toString('hex')}`;
    const attempt = await new VolumeLocks(engine).tryLock(liveVolume, runtime, LABELS);
    expect(attempt.held).not.toBeNull();
    const liveId = attempt.held!.id;

    const r = runCli(['reconcile', '--json'], { home, timeoutMs: 180_000 });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as {
      actions: { kind: string; action: string; evidence: Record<string, unknown> }[];
    };
    const about = (id: string) =>
      report.actions.filter((a) => (a.evidence as { containerId?: string }).containerId === id);
    expect(about(dead!.id).map((a) => a.action)).toEqual(['discovered', 'removed']);
    expect(JSON.stringify(about(dead!.id)[0]!.evidence)).toContain('whose holder is gone');
    expect(about(liveId)).toEqual([]);

    expect(await engine.inspectContainer(dead!.id)).toBeNull();
    const live = await engine.inspectContainer(liveId);
    expect(live?.labels[LABEL_LOCK_FOR]).toBe(liveVolume);
    expect(await attempt.held!.stillHeld()).toBe(true);
    await attempt.held!.release();
    expect(await engine.inspectContainer(liveId)).toBeNull();
  });
});
