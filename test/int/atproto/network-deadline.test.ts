// Every network read has a total deadline (connect, headers AND body) that garbage collection cannot lose, and no
// read outlives what is left of the execution's deadline. Against the real PDS and PLC directory (in process),
// with proxies in front of them that trickle bodies at 1 byte/s or answer only after 9 s.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishCode } from '../../../src/supervisor/executions/publishing.ts';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { publishNodeRuntime, startTestPds, type TestAccount, type TestPds } from '../../support/pds.ts';
import { pointPdsAt, startSlowProxy, type SlowProxy } from '../../support/slow-proxy.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const CHILD = resolve(import.meta.dirname, '../../fixtures/slow-read-child.ts');
const COLLECTION = 'com.example.deadline.probe';
// The reads run under this Node, and under the machine's own Node when it is another one (Node 20 here: its
// undici reaches the fetch controller through a WeakRef, which is where a collection used to lose the deadline).
const SYSTEM_NODE = '/usr/bin/node';
const NODES = [
  process.execPath,
  ...(existsSync(SYSTEM_NODE) && realpathSync(SYSTEM_NODE) !== realpathSync(process.execPath) ? [SYSTEM_NODE] : []),
];
let pds: TestPds;
let alice: TestAccount;
let recordUri: string;
let blobCid: string;
const proxies: SlowProxy[] = [];

beforeAll(async () => {
  pds = await startTestPds();
  alice = await pds.createAccount('alice.test');
  // Bodies big enough that a trickle takes minutes: a record with a 4 KB field, a 64 KB blob.
  recordUri = (
    await alice.publisher.putRecord(COLLECTION, 'probe', {
      $type: COLLECTION,
      pad: 'p'.repeat(4096),
      createdAt: new Date().toISOString(),
    })
  ).uri;
  blobCid = (await alice.publisher.uploadBlob(new Uint8Array(64 * 1024).fill(7), 'application/octet-stream')).ref.$link;
}, 120_000);

afterAll(async () => {
  for (const p of proxies) await p.close();
  await pds?.close();
});

interface ReadReport {
  name: string;
  code: string;
  bound: string | null;
  ms: number;
}

/** Runs the reads in a child with --expose-gc (collections forced during each read); kills it if a read hangs. */
function runChild(
  node: string,
  args: Record<string, unknown>,
  killAfterMs: number,
): Promise<{ reports: ReadReport[]; exit: number | null; killed: boolean; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(
      node,
      ['--expose-gc', '--unhandled-rejections=strict', '--import', 'tsx', CHILD, JSON.stringify(args)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const reports: ReadReport[] = [];
    let stderr = '';
    let killed = false;
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    createInterface({ input: child.stdout }).on('line', (l) => reports.push(JSON.parse(l) as ReadReport));
    const guard = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, killAfterMs);
    child.on('exit', (code) => {
      clearTimeout(guard);
      done({ reports, exit: code, killed, stderr });
    });
  });
}

describe('read deadlines', () => {
  it.each(NODES)(
    'a body trickling at 1 B/s is cut off within the read deadline, with GC forced during the read (DID document, record, blob) — %s',
    async (node) => {
      const slowPlc = await startSlowProxy(pds.plcUrl, () => ({ trickleBytesPerSecond: 1, eagerHeaders: true }));
      const slowPds = await startSlowProxy(pds.pdsUrl, () => ({ trickleBytesPerSecond: 1, eagerHeaders: true }));
      proxies.push(slowPlc, slowPds);
      const timeoutMs = 1500;
      const r = await runChild(
        node,
        {
          did: alice.did,
          recordUri,
          blobCid,
          plcUrl: pds.plcUrl,
          slowPlcUrl: slowPlc.url,
          slowPdsUrl: slowPds.url,
          timeoutMs,
        },
        60_000,
      );
      expect(r.killed, `a read was never cut off:\n${r.stderr}`).toBe(false);
      expect(r.exit, r.stderr).toBe(0);
      expect(r.reports.map((x) => [x.name, x.code, x.bound])).toEqual([
        ['did-document', 'NETWORK_TIMEOUT', 'read'],
        ['record', 'NETWORK_TIMEOUT', 'read'],
        ['blob', 'NETWORK_TIMEOUT', 'read'],
        ['record-execution-deadline', 'NETWORK_TIMEOUT', 'execution'],
      ]);
      // Cut off at the deadline (not before, not long after): the body had minutes left to trickle.
      for (const x of r.reports) {
        expect(x.ms, x.name).toBeGreaterThanOrEqual(timeoutMs - 100);
        expect(x.ms, x.name).toBeLessThan(timeoutMs + 2500);
      }
      // It was the body that was cut: the headers had been sent at once, and at most a few bytes of a body of kilobytes.
      expect(slowPds.requests.length).toBe(3);
      expect(slowPlc.requests.length).toBe(1);
      for (const q of [...slowPds.requests, ...slowPlc.requests]) expect(q.headersSent, q.path).toBe(true);
      for (const q of [...slowPds.requests, ...slowPlc.requests]) expect(q.sent, q.path).toBeLessThan(10);
    },
    90_000,
  );

  it('a 3 s execution whose PDS answers every read after 9 s fails at its deadline (timeout, NETWORK_TIMEOUT), not after 9 s', async () => {
    const runtimeUri = await publishNodeRuntime(pds, 'runtimes.test');
    const code = await publishCode(alice.publisher, {
      dir: join(REPO, 'examples/greet-node'),
      runtime: runtimeUri,
      atproto: { plcUrl: pds.plcUrl },
    });
    const slowPds = await startSlowProxy(pds.pdsUrl, () => ({ delayMs: 9000 }));
    const plc = await startSlowProxy(pds.plcUrl, (path) =>
      path.startsWith('/did:plc:') ? { rewrite: pointPdsAt(slowPds.url) } : null,
    );
    proxies.push(slowPds, plc);
    const home = mkdtempSync(join(tmpdir(), 'runlog-deadline-'));
    const rl = await createRunlog({
      home,
      atproto: { plcUrl: plc.url },
      reconcile: false,
      engineWatch: false,
      watchApps: false,
      log: () => undefined,
    });
    try {
      const t0 = Date.now();
      const out = await rl.execute({ uri: code.uri, handler: 'greet', input: { name: 'Ada' }, timeoutMs: 3000 });
      const elapsed = Date.now() - t0;
      expect(out.status).toBe('failed');
      expect(out.failure).toMatchObject({ reason: 'timeout', code: 'NETWORK_TIMEOUT' });
      expect(elapsed).toBeLessThan(9000);
      expect((await rl.events(out.executionId)).map((e) => e.type)).not.toContain('execution.resolved');
      expect(slowPds.requests.some((q) => q.path.includes('com.atproto.sync.getRecord'))).toBe(true);
    } finally {
      await rl.close();
      rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);
});
