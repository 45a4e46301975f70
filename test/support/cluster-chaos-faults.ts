// The cluster chaos harness's hands: calling a node's API, polling the lease rows, sending a planned request,
// striking a round's fault and undoing it, and the timer probe. cluster-chaos.ts runs a round with these.
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { FAULT_POINTS } from '../../src/supervisor/host/faults.ts';
import { HELLO_APP_DIR } from './apps.ts';
import type { ChaosOutcome, LeaseMove, RoundEvidence } from './cluster-chaos-checks.ts';
import type { ChaosRequestPlan, ChaosRoundPlan } from './cluster-chaos-plan.ts';
import type { Cluster, ClusterNode } from './cluster-fixture.ts';
import { docker, type ContainerEventWatch } from './docker.ts';
import type { ThrowawayPostgres } from './pg-cluster.ts';

/**
 * A request with no answer by then counts as unanswered (status 0). Longer than the supervisor's own deadlines for
 * a spawn (health timeout + 30 s, + 30 s more when placed on another node: 90 s by default), so that its own
 * answer (TIMEOUT, say) is what the checks judge.
 */
export const REQUEST_TIMEOUT_MS = 100_000;

/** What a round works with: the cluster, its server, its nodes as they are now, and the code and app it runs. */
export interface RoundContext {
  cluster: Cluster;
  server: ThrowawayPostgres;
  pool: pg.Pool;
  watch: ContainerEventWatch;
  /** The current process of each node (a node killed and started again is a new one). */
  nodes: Map<string, ClusterNode>;
  flagsOf(name: string): string[];
  uri: string;
  /** The timer probe's app dirs, by when its timer comes due (ChaosRoundPlan.probeTimer). */
  probeApps: { pending: string; overdue: string };
  ttlMs: number;
  runSeed: number;
  log(line: string): void;
  /** Containers already reported as orphans (a later round does not report them again). */
  reported: Set<string>;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** What a process is doing ('T' when stopped by SIGSTOP), or null when it is gone. */
export function processState(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0] ?? null;
  } catch {
    return null;
  }
}

const pgidOf = (pid: number | 'self'): number =>
  Number(
    readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /s, '')
      .split(' ')[2],
  );

/** SIGKILL of every process group led by a process whose command line names the cluster's root (PRoot apps a killed node left). */
export function killStrays(root: string): number {
  let n = 0;
  const own = pgidOf('self');
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(root)) continue;
      const pgid = pgidOf(Number(entry));
      if (pgid > 1 && pgid !== own) {
        process.kill(-pgid, 'SIGKILL');
        n += 1;
      }
    } catch {
      // gone meanwhile, or not ours
    }
  }
  return n;
}

/**
 * Starts a node with extra environment (RUNLOG_FAULT…). cluster-fixture's startNode hands its child process.env as
 * it is when it spawns, which it does before its first await: the variables are set around that call only.
 */
function startNodeWithEnv(
  cluster: Cluster,
  name: string,
  flags: string[],
  env: Record<string, string>,
): Promise<ClusterNode> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return cluster.startNode(name, flags);
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** Calls a node's API with a deadline; a torn or refused connection, or no answer in time, is status 0. */
export async function call(
  node: ClusterNode,
  method: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: any; error: string | null }> {
  try {
    const r = await fetch(new URL(path, node.info.url), {
      method,
      headers: { authorization: `Bearer ${node.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await r.text();
    let parsed: any = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: the text as it is
    }
    return {
      status: r.status,
      body: parsed,
      error: r.ok ? null : (parsed?.error?.code ?? parsed?.code ?? `HTTP ${r.status}`),
    };
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return {
      status: 0,
      body: null,
      error: `${(err as Error).name}: ${(err as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ''}`,
    };
  }
}

export async function q<R = any>(ctx: RoundContext, text: string, params: unknown[] = []): Promise<R[]> {
  return (await ctx.pool.query(text, params)).rows as R[];
}

/** A query retried through a PostgreSQL outage (up to 60 s). */
export async function qRetry<R = any>(ctx: RoundContext, text: string, params: unknown[] = []): Promise<R[]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      return await q<R>(ctx, text, params);
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(300);
    }
  }
}

/** Polls the lease rows every 200 ms, noting each change of owner, until stopped. */
export function watchLeases(ctx: RoundContext, t0: number): { stop(): Promise<LeaseMove[]> } {
  const moves: LeaseMove[] = [];
  let last: Map<string, string> | null = null;
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const rows = await q<{ stream: string; node: string }>(ctx, 'SELECT stream, node FROM leases');
        const now = new Map(rows.map((r) => [r.stream, r.node]));
        if (last)
          for (const [s, n] of now)
            if (last.has(s) && last.get(s) !== n)
              moves.push({ stream: s, from: last.get(s)!, to: n, atMs: Date.now() - t0 });
        last = now;
      } catch {
        // PostgreSQL out: the next poll sees what changed meanwhile
      }
      await sleep(200);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return moves;
    },
  };
}

/** Sends one planned request through its node (as the node is at that moment) and records what came back. */
export async function send(ctx: RoundContext, plan: ChaosRoundPlan, r: ChaosRequestPlan): Promise<ChaosOutcome> {
  const tag = `r${plan.index + 1}-${r.i}-${r.kind === 'exec' ? 'x' : r.kind === 'spawn-proot' ? 'p' : 'c'}-${process.pid}`;
  const node = ctx.nodes.get(r.via)!;
  const pin = r.pin ? { node: r.pin } : {};
  const res =
    r.kind === 'exec'
      ? await call(node, 'POST', '/api/executions', {
          uri: ctx.uri,
          handler: 'nap',
          input: { ms: r.napMs, tag },
          timeoutMs: 60_000,
          ...pin,
        })
      : await call(node, 'POST', '/api/instances', {
          appDir: HELLO_APP_DIR,
          sandbox: r.kind === 'spawn-proot' ? 'proot' : 'container',
          instanceId: tag,
          ...pin,
        });
  const acked = r.kind === 'exec' ? res.status === 200 && typeof res.body?.status === 'string' : res.status === 201;
  return {
    i: r.i,
    kind: r.kind,
    tag,
    via: r.via,
    pin: r.pin,
    status: res.status,
    body: res.body,
    acked,
    error: res.error,
  };
}

/** The timer probe, part one: an instance of the victim's running in a container, before the round's requests. */
export async function spawnProbe(ctx: RoundContext, plan: ChaosRoundPlan): Promise<{ id: string } | { error: string }> {
  const id = `probe${plan.index + 1}-${process.pid}`;
  const r = await call(ctx.nodes.get(plan.victim!)!, 'POST', '/api/instances', {
    appDir: ctx.probeApps[plan.probeTimer],
    sandbox: 'container',
    instanceId: id,
    node: plan.victim,
  });
  return r.status === 201
    ? { id }
    : { error: `spawning it on ${plan.victim} was answered ${r.status} ${JSON.stringify(r.body)}` };
}

/** Part two, just before the fault: its container killed, and its instance.restart-scheduled appended. */
export async function crashProbe(ctx: RoundContext, id: string): Promise<NonNullable<RoundEvidence['probe']>> {
  const stream = `instance-${id}`;
  const running = (await ctx.cluster.containers({ 'runlog.stream': stream })).filter((c) => c.State === 'running');
  if (running.length !== 1) return { error: `${stream} has ${running.length} running containers, not 1` };
  await docker.getContainer(running[0]!.Id).kill();
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const rows = await q<{ seq: number }>(
      ctx,
      "SELECT seq::int FROM events WHERE stream = $1 AND type = 'instance.restart-scheduled' ORDER BY seq DESC LIMIT 1",
      [stream],
    ).catch(() => []);
    if (rows[0]) return { stream, scheduledSeq: rows[0].seq };
    await sleep(100);
  }
  return { error: `no instance.restart-scheduled on ${stream} within 15 s of killing its container` };
}

/**
 * stop-append-locked, before the round: the victim started again with the fault armed. On a build whose
 * faults.ts knows no such point `serve` refuses to start: that is the round's fault failure (the victim is
 * started again without it), never a fault faked from outside. The fault counts only appends of
 * `execution.started` (an execution this node begins to run: the round's requests and nudges make them, its
 * start-up never does). Counting every append, a node that reconciled, reclaimed or picked up enough at start-up
 * stopped itself before it said it was serving, and the harness waited for it forever.
 */
const APPEND_LOCKED_EVENT = 'execution.started';

export async function armAppendLocked(ctx: RoundContext, plan: ChaosRoundPlan): Promise<string | null> {
  const name = plan.victim!;
  if (!(FAULT_POINTS as readonly string[]).includes('append-locked')) {
    return (
      `this build cannot SIGSTOP a node at the append lock: src/supervisor/host/faults.ts has no 'append-locked' ` +
      `point (known: ${FAULT_POINTS.join(', ')}), and no RUNLOG_FAULT_ACTION=stop; issue 27 item 1 adds them`
    );
  }
  await ctx.nodes.get(name)!.stop();
  try {
    ctx.nodes.set(
      name,
      await startNodeWithEnv(ctx.cluster, name, ctx.flagsOf(name), {
        RUNLOG_FAULT: `append-locked:${plan.appendLockedNth}`,
        RUNLOG_FAULT_EVENT: APPEND_LOCKED_EVENT,
        RUNLOG_FAULT_ACTION: 'stop',
      }),
    );
    return null;
  } catch (err) {
    ctx.nodes.set(name, await ctx.cluster.startNode(name, ctx.flagsOf(name)));
    const said = (err as Error).message
      .split('\n')
      .filter((l) => /RUNLOG_FAULT|fault point|unknown point/i.test(l))
      .slice(0, 2)
      .join(' / ');
    return (
      `this build cannot SIGSTOP a node at the append lock: ` +
      `\`runlog serve\` with RUNLOG_FAULT=append-locked:${plan.appendLockedNth} ` +
      `RUNLOG_FAULT_ACTION=stop did not start (${said || (err as Error).message.slice(-600)}); ` +
      `it needs the append-locked fault point and its stop action (issue 27 item 1)`
    );
  }
}

/** Strikes the round's fault and undoes it (the node started again or woken, the server started again). */
export async function strike(
  ctx: RoundContext,
  plan: ChaosRoundPlan,
  nudge: (node: string) => void,
): Promise<{ outageMs: number | null; failure: string | null }> {
  const pause = 2 * ctx.ttlMs;
  const victim = plan.victim ? ctx.nodes.get(plan.victim)! : undefined;
  const t0 = Date.now();
  switch (plan.kind) {
    case 'kill-node':
      await victim!.kill();
      await sleep(pause);
      ctx.nodes.set(victim!.name, await ctx.cluster.startNode(victim!.name, ctx.flagsOf(victim!.name)));
      return { outageMs: null, failure: null };
    case 'stop-node':
      victim!.signal('SIGSTOP');
      await sleep(pause);
      victim!.signal('SIGCONT');
      return { outageMs: null, failure: null };
    case 'pg-restart':
      await ctx.server.restart('fast');
      return { outageMs: Date.now() - t0, failure: null };
    case 'pg-kill':
      await ctx.server.killPostmaster();
      await ctx.server.startAsync();
      return { outageMs: Date.now() - t0, failure: null };
    case 'stop-append-locked': {
      // The node stops itself at the n-th time it holds the append lock; executions pinned to it make it append
      // if the round's own requests do not.
      const deadline = Date.now() + 20_000;
      let nudged = Date.now();
      while (processState(victim!.pid) !== 'T') {
        if (!victim!.alive())
          return {
            outageMs: null,
            failure: `${victim!.name} exited instead of stopping itself: ${victim!.stderr().slice(-1500)}`,
          };
        if (Date.now() > deadline)
          return {
            outageMs: null,
            failure:
              `${victim!.name} (RUNLOG_FAULT=append-locked:${plan.appendLockedNth} ` +
              `RUNLOG_FAULT_EVENT=${APPEND_LOCKED_EVENT} RUNLOG_FAULT_ACTION=stop) did not stop itself within ` +
              `20 s, though executions pinned to it made it append: does \`runlog serve\` read RUNLOG_FAULT?`,
          };
        if (Date.now() - nudged > 3000) {
          nudge(victim!.name);
          nudged = Date.now();
        }
        await sleep(50);
      }
      await sleep(pause);
      victim!.signal('SIGCONT');
      return { outageMs: null, failure: null };
    }
  }
}
