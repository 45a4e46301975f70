// Any node accepts stop / kill / logs of an instance another node owns, and `exec --node` pins an execution:
// three real supervisors (`runlog serve --store postgres://… --node a|b|c`, homes of their own) on the real
// PostgreSQL server (a schema of this test's), real container instances on the real Docker Engine, a real PDS.
// - stop through a non-owner's API, kill through a non-owner's CLI: the owner acts (its event carries the
//   request's id, appended under its lease) and the caller answers with the owner's outcome;
// - logs through a non-owner: the owner's buffered lines (--follow: test/int/cluster/cluster-follow-pg.test.ts);
// - exec --node c through a's CLI: c claims and runs it (read from the log); unknown / malformed: typed errors;
// - an owner stopped cleanly: NODE_UNAVAILABLE at once, nothing appended;
// - the owner SIGSTOPped with a stop pending, then killed -9: the survivor that takes the instance over carries
//   the request out once and answers; the caller gets that answer;
// - liveness is judged on PostgreSQL's clock: a node whose own clock is years off is live while it beats.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nodeLoads } from '../../../src/supervisor/cluster/nodes.ts';
import { publishCode } from '../../../src/supervisor/executions/publishing.ts';
import { PgHostStore } from '../../../src/store/postgres/host-store.ts';
import { HELLO_APP_DIR, requireDockerAppBase, until } from '../../support/apps.ts';
import { cliArgs, REPO } from '../../support/cli.ts';
import { runCli, type CliResult } from '../../support/cli-process.ts';
import {
  cleanupClusters,
  createCluster,
  type ClusterNode,
  type ClusterEventRow,
} from '../../support/cluster-fixture.ts';
import { requireRegistry } from '../../support/docker.ts';
import { publishNodeRuntime, startTestPds, type TestPds } from '../../support/pds.ts';

const TTL = 5000;
let pds: TestPds | undefined;
afterAll(async () => {
  await cleanupClusters();
  await pds?.close();
});

/** `runlog …` without blocking this process (the PDS the supervisors resolve DIDs from runs in it). */
function runCliAsync(args: string[], home: string): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      cliArgs(...args),
      { cwd: REPO, env: { ...process.env, RUNLOG_HOME: home }, encoding: 'utf8', timeout: 180_000 },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
      },
    );
  });
}

type Ev = ClusterEventRow;

/** Bounded, saying what the node printed: a hang here once ran into the test's 15-minute timeout with nothing to show. */
async function within<T>(node: ClusterNode, what: string, p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(
            () =>
              reject(
                new Error(`${what}: nothing within ${ms} ms; ${node.name}'s output:\n${node.stderr().slice(-6000)}`),
              ),
            ms,
          )),
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

describe('hand-over of stop, kill, logs and exec --node between cluster nodes', () => {
  it(
    'any node accepts them; the owner (or the survivor of its kill -9) acts once and answers',
    { timeout: 900_000 },
    async () => {
      await requireDockerAppBase();
      await requireRegistry();
      const cluster = await createCluster({ tag: 'handover', ttlMs: TTL });
      const { store } = cluster;
      // The log's own rows, as the database holds them (data and meta as stored).
      const events = (stream: string) =>
        cluster.sql<Ev>('SELECT seq::int, stream, type, data, meta FROM events WHERE stream = $1 ORDER BY seq', [
          stream,
        ]);
      pds = await startTestPds();
      const runtime = await publishNodeRuntime(pds, `hort-${process.pid}.test`);
      const author = await pds.createAccount(`ho-${process.pid}.test`);
      const codeDir = mkdtempSync(join(cluster.root, 'code-'));
      writeFileSync(join(codeDir, 'index.mjs'), 'export async function hi(input) { return { n: input.n }; }\n');
      const uri = (
        await publishCode(author.publisher, {
          dir: codeDir,
          runtime,
          entrypoint: 'index.mjs',
          atproto: { plcUrl: pds.plcUrl },
        })
      ).uri;
      const flags = ['--plc', pds.plcUrl];
      const [a, b, c] = [
        await cluster.startNode('a', flags),
        await cluster.startNode('b', flags),
        await cluster.startNode('c', flags),
      ];
      const cli = (via: ClusterNode, args: string[]) =>
        runCli([...args, '--json'], { home: via.home, timeoutMs: 180_000 });
      const spawn = (id: string, node: string) => {
        const r = cli(a, ['spawn', HELLO_APP_DIR, '--sandbox', 'container', '--id', id, '--node', node]);
        expect(r.code, r.stdout + r.stderr).toBe(0);
        expect(JSON.parse(r.stdout)).toMatchObject({ id, state: 'running' });
      };
      const owner = async (id: string) =>
        (await cluster.sql<{ node: string }>('SELECT node FROM leases WHERE stream = $1', [`instance-${id}`]))[0]
          ?.node ?? null;
      const tag = process.pid;

      // Liveness on PostgreSQL's clock: each node's beat is the server's time; a node whose clock is years off is live.
      const beats = await cluster.sql<{ node: string; skew_ms: number }>(
        'SELECT node, abs(extract(epoch FROM beat_at::timestamptz - clock_timestamp()) * 1000)::float8 AS skew_ms FROM nodes ORDER BY node',
      );
      expect(beats.map((r) => r.node)).toEqual(['a', 'b', 'c']);
      for (const r of beats) expect(r.skew_ms, r.node).toBeLessThan(30_000);
      const skewed = await PgHostStore.open({ url: store, pollMs: 0 });
      try {
        await skewed.writeHeartbeat({
          node: 'skewed',
          pid: 1,
          startedAt: '2001-01-01T00:00:00.000Z',
          beatAt: '2001-01-01T00:00:00.000Z',
          intervalMs: 5000,
          stoppedAt: null,
        });
        await cluster.sql(
          'INSERT INTO nodes (node, pid, host, started_at, beat_at, interval_ms, stopped_at) ' +
            "VALUES ('quiet', 1, 'h', '2026-01-01T00:00:00.000Z', " +
            "to_char((clock_timestamp() - interval '1 minute') AT TIME ZONE 'UTC', " +
            '\'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"\'), 5000, NULL)',
        );
        const loads = new Map(nodeLoads(await skewed.clusterRecords()).map((n) => [n.node, n.live]));
        expect(Object.fromEntries(loads)).toMatchObject({ a: true, b: true, c: true, skewed: true, quiet: false });
        await cluster.sql("DELETE FROM nodes WHERE node IN ('skewed', 'quiet')");
      } finally {
        await skewed.close();
      }

      // Instances on b and c, spawned through a.
      const [i1, i2, i3, i4] = [`h1-${tag}`, `h2-${tag}`, `h3-${tag}`, `h4-${tag}`];
      spawn(i1, 'b');
      spawn(i2, 'b');
      spawn(i3, 'c');
      expect([await owner(i1), await owner(i2), await owner(i3)]).toEqual(['b', 'b', 'c']);

      // logs through a (not the owner): b's buffered lines (--follow through a non-owner: cluster-follow-pg).
      const logs = cli(a, ['logs', i1]);
      expect(logs.code, logs.stderr).toBe(0);
      expect(logs.stdout).toContain('hello-app com.example.hello listening on');

      // stop through a's API: b stops it and answers; a answers with the stopped instance.
      const stopped = await a.api('POST', `/api/actors/${i1}/stop`, { graceMs: 2000 });
      expect(stopped, JSON.stringify(stopped.body)).toMatchObject({ status: 200, body: { id: i1, state: 'stopped' } });
      let onB = await events('placement-b');
      const stopReq = onB.find(
        (e) => e.type === 'handover.requested' && e.data.instanceId === i1 && e.data.action === 'stop',
      )!;
      expect(stopReq).toMatchObject({ data: { from: 'a', to: 'b', graceMs: 2000 }, meta: { node: 'a' } });
      expect(onB.filter((e) => e.type === 'handover.answered' && e.data.requestId === stopReq.data.requestId)).toEqual([
        expect.objectContaining({
          data: expect.objectContaining({ by: 'b', ok: true, state: 'stopped' }),
          meta: expect.objectContaining({ node: 'b' }),
        }),
      ]);
      const h1 = await events(`instance-${i1}`);
      expect(h1.filter((e) => e.type === 'instance.stop-requested')).toEqual([
        expect.objectContaining({
          data: { graceMs: 2000 },
          meta: expect.objectContaining({ node: 'b', handover: stopReq.data.requestId }),
        }),
      ]);
      expect(h1.every((e) => e.meta.node === 'b')).toBe(true);

      // kill through c's CLI: b kills it.
      const killed = cli(c, ['kill', i2]);
      expect(killed.code, killed.stdout + killed.stderr).toBe(0);
      expect(JSON.parse(killed.stdout)).toMatchObject({ id: i2, state: 'stopped' });
      onB = await events('placement-b');
      const killReq = onB.find((e) => e.type === 'handover.requested' && e.data.instanceId === i2)!;
      expect(killReq).toMatchObject({ data: { action: 'kill', from: 'c', to: 'b' } });
      expect((await events(`instance-${i2}`)).filter((e) => e.type === 'instance.kill-requested')).toEqual([
        expect.objectContaining({ meta: expect.objectContaining({ node: 'b', handover: killReq.data.requestId }) }),
      ]);
      // A refusal comes back typed: stopping a stopped instance succeeds (as locally), killing it is ILLEGAL_EVENT.
      expect(cli(a, ['stop', i2]).code).toBe(0);
      const again = cli(a, ['kill', i2]);
      expect(again.code).toBe(5);
      expect(again.stdout + again.stderr).toContain('ILLEGAL_EVENT');

      // exec --node c through a: c claims it (its execution.requested, signed by c); unknown and malformed nodes are typed.
      const ex = await runCliAsync(['exec', uri, 'hi', '--input', '{"n":7}', '--node', 'c', '--json'], a.home);
      expect(ex.code, ex.stdout + ex.stderr).toBe(0);
      const outcome = JSON.parse(ex.stdout);
      expect(outcome).toMatchObject({ status: 'succeeded', output: { n: 7 } });
      const exEvents = await events(`execution-${outcome.executionId}`);
      expect(exEvents[0]).toMatchObject({ type: 'execution.requested', meta: { node: 'c' } });
      expect(new Set(exEvents.map((e) => e.meta.node))).toEqual(new Set(['c']));
      const queued = (await events('queue-executions')).find((e) => e.data.executionId === outcome.executionId);
      expect(queued).toMatchObject({ data: { node: 'c', from: 'a' } });
      const unknown = cli(a, ['exec', uri, 'hi', '--node', 'zz']);
      expect(unknown.stdout + unknown.stderr).toContain('NODE_UNKNOWN');
      const malformed = cli(a, ['exec', uri, 'hi', '--node', 'no such node!']);
      expect(malformed.code).toBe(2);
      expect(malformed.stdout + malformed.stderr).toContain('NODE_INVALID');
      const badApi = await a.api('POST', '/api/executions', { uri, handler: 'hi', node: 'no such node!' });
      expect(badApi).toMatchObject({ status: 400, body: { error: { code: 'NODE_INVALID' } } });

      // The owner stopped cleanly (its lease not expired yet): NODE_UNAVAILABLE at once, no request appended.
      c.signal('SIGTERM');
      expect(await within(c, 'c exiting after SIGTERM', c.served.exit, 90_000), c.stderr().slice(-3000)).toBe(0);
      const unavailable = await a.api('POST', `/api/actors/${i3}/stop`, {});
      expect(unavailable).toMatchObject({ status: 503, body: { error: { code: 'NODE_UNAVAILABLE' } } });
      expect((await events('placement-c')).filter((e) => e.type === 'handover.requested')).toEqual([]);

      // The owner SIGSTOPped with a stop pending, then killed -9: the survivor (a: c is stopped) takes i4 over and
      // carries the request out once; the caller, waiting on a, gets that answer.
      spawn(i4, 'b');
      expect(await owner(i4)).toBe('b');
      b.signal('SIGSTOP');
      const pending = a.api('POST', `/api/actors/${i4}/stop`, { graceMs: 1000 });
      const req4 = await until(
        'the stop request is in the log',
        async () =>
          (await events('placement-b')).find((e) => e.type === 'handover.requested' && e.data.instanceId === i4),
        20_000,
        100,
      );
      b.signal('SIGKILL');
      const answered = await within(a, 'the stop of i4 through a', pending, 180_000);
      expect(answered, JSON.stringify(answered.body)).toMatchObject({
        status: 200,
        body: { id: i4, state: 'stopped' },
      });
      onB = await events('placement-b');
      expect(onB.filter((e) => e.type === 'handover.answered' && e.data.requestId === req4.data.requestId)).toEqual([
        expect.objectContaining({ data: expect.objectContaining({ by: 'a', ok: true, state: 'stopped' }) }),
      ]);
      const h4 = await events(`instance-${i4}`);
      // b never acted on it (it was stopped before it could): the one stop-requested is a's, after its takeover.
      const stops = h4.filter((e) => e.type === 'instance.stop-requested');
      expect(stops).toEqual([
        expect.objectContaining({ meta: expect.objectContaining({ node: 'a', handover: req4.data.requestId }) }),
      ]);
      const takeover = h4.findIndex((e) => e.meta.node === 'a');
      expect(h4[takeover]!.seq).toBeGreaterThan(req4.seq);
      expect(h4[takeover]!.type).not.toBe('instance.stop-requested'); // what a knows is recorded first
      expect(a.stderr()).toContain(`stop of ${i4} asked by a: stopped`);

      a.signal('SIGTERM');
      expect(await within(a, 'a exiting after SIGTERM', a.served.exit, 90_000), a.stderr().slice(-3000)).toBe(0);
    },
  );
});
