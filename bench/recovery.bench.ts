// Recovery after a supervisor restart, side by side with the raw primitive in the same run.
//
// Setup: N running container instances created by runlog (spawnApp, sandbox 'container', 8 at a time) of a
// minimal raw app: entrypoint.sh execs a ~20-line Perl HTTP server (perl-base is in the app-base image) that
// answers the health check with its identity and the lifecycle hooks with 204. A Perl instance takes ~3.5 MiB
// in its cgroup against ~17 MiB for hello-app's node (docker stats), so 200 of them fit beside other work on
// this machine. recovery.200 grows recovery.50's fleet when both run in one process (creating and removing a
// container takes ~1 s here: setup dominates the wall time); setup time and memory are in the notes.
// Each round: rl.close() (ContainerRunner.close only detaches: the containers keep running), then
//   runlog  createRunlog() on the same home, timed until it resolves: open + quick_check, replay every live
//           actor, list + inspect the containers (inspects in parallel), a durable `instance.adopted` per
//           instance (actors reconciled concurrently, so the host group-commits their events); the
//           reattach effects (log stream, exit watcher, `instance.running`) run meanwhile (time to all
//           `running` is in the notes, with where the time went: before the first adoption, adopting, and
//           inside appends, from the FaultHook the host calls around every append).
//   raw     dockerode listContainers by the same labels + inspect of each of the same containers, one after
//           the other, as the issue defines the primitive (the same inspects in parallel are in the notes).
// After the fleet is up: a 3 s pause and one unmeasured restart (warm-up). Every round checks that all N were
// adopted once more with their original container ids and start times, spawned only once, and running: nothing
// was restarted or recreated. recovery.200 runs min(rounds, 3) rounds.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { createRunlog, type Runlog, type RunlogOptions } from '../src/supervisor/runlog.ts';
import { mapConcurrent } from '../src/domain/concurrency.ts';
import { closeWithin, median, nowMs, round, sizes, type Bench, type BenchResult } from './harness.ts';

const SETUP_DIR = process.env.RUNLOG_SETUP_DIR ?? '/var/lib/runlog-setup';
const ROOTFS = process.env.RUNLOG_ROOTFS ?? join(SETUP_DIR, 'rootfs/debian-bookworm');
const DOCKER_SOCKET = '/var/run/docker.sock';
const SETUP_HINT = 'run `npm run setup`';
const BENCH_LABELS = { 'runlog.bench': '1' } as const;
const APP_ID = 'com.example.benchtiny';
const SPAWN_CONCURRENCY = 8;

const TINY_SERVER = String.raw`use strict; use warnings; use IO::Socket::INET;
$SIG{TERM} = sub { exit 0 };
my ($app, $inst, $port) = @ENV{qw(APP_ID APP_INSTANCE_ID APP_PORT)};
my $srv = IO::Socket::INET->new(LocalAddr => '0.0.0.0', LocalPort => $port, Listen => 64, ReuseAddr => 1) or die "listen on $port: $!\n";
while (my $c = $srv->accept) {
  local $/ = "\r\n";
  my $line = <$c>;
  if (!defined $line) { close $c; next; }
  my ($method, $path) = split ' ', $line;
  my $len = 0;
  while (defined(my $h = <$c>)) { last if $h eq "\r\n"; $len = $1 if $h =~ /^content-length:\s*(\d+)/i; }
  read($c, my $body, $len) if $len;
  my ($status, $out) = ('404 Not Found', '{"error":"not found"}');
  if ($path =~ m{^/api/lifecycle/health}) { ($status, $out) = ('200 OK', qq({"status":"ok","appId":"$app","instanceId":"$inst"})) }
  elsif ($method eq 'POST' && $path =~ m{^/api/lifecycle/on[A-Z]}) { ($status, $out) = ('204 No Content', '') }
  print $c "HTTP/1.1 $status\r\nx-app-id: $app\r\nx-app-instance-id: $inst\r\ncontent-type: application/json\r\n"
    . "content-length: " . length($out) . "\r\nconnection: close\r\n\r\n$out";
  close $c;
}
`;

async function requireParts(docker: Docker): Promise<void> {
  if (!existsSync(join(ROOTFS, '.runlog-complete'))) throw new Error(`no Debian rootfs at ${ROOTFS}: ${SETUP_HINT}`);
  try {
    await docker.ping();
  } catch (e) {
    throw new Error(`Docker does not answer on ${DOCKER_SOCKET} (${(e as Error).message}): ${SETUP_HINT}`);
  }
  const refFile = join(SETUP_DIR, 'images/app-base.ref');
  if (!existsSync(refFile) || !/@sha256:[0-9a-f]{64}$/.test(readFileSync(refFile, 'utf8').trim()))
    throw new Error(`no app-base image digest recorded at ${refFile}: ${SETUP_HINT}`);
}

function writeTinyApp(dir: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'runlog.json'),
    JSON.stringify(
      {
        appId: APP_ID,
        sandbox: 'container',
        runtime: 'raw',
        tools: [],
        lifecycle: { basePath: '' },
        restart: { policy: 'on-failure', maxRestarts: 1, backoffMs: 1000, maxBackoffMs: 1000 },
      },
      null,
      2,
    ),
  );
  writeFileSync(join(dir, 'entrypoint.sh'), '#!/bin/bash\nexec /usr/bin/perl server.pl\n');
  chmodSync(join(dir, 'entrypoint.sh'), 0o755);
  writeFileSync(join(dir, 'server.pl'), TINY_SERVER);
}

interface Observed {
  ids: Map<string, { containerId: string; startedAt: string }>;
}

/** The raw primitive: list by the reconciler's labels, then inspect each container. */
async function rawList(docker: Docker, home: string, parallel: boolean): Promise<Observed> {
  const list = await docker.listContainers({
    all: true,
    filters: { label: ['runlog.kind=instance', `runlog.home=${home}`] },
  });
  const ids = new Map<string, { containerId: string; startedAt: string }>();
  const one = async (id: string) => {
    const info = await docker.getContainer(id).inspect();
    const stream = info.Config.Labels['runlog.stream'] ?? '';
    ids.set(stream.slice('instance-'.length), { containerId: info.Id, startedAt: info.State.StartedAt });
  };
  if (parallel) await Promise.all(list.map((c) => one(c.Id)));
  else for (const c of list) await one(c.Id);
  return { ids };
}

/** A container's memory as `docker stats` shows it (cgroup v1 usage minus inactive file cache), in MiB. */
function containerMemMib(containerId: string): number {
  for (const base of [
    `/sys/fs/cgroup/memory/docker/${containerId}`,
    `/sys/fs/cgroup/system.slice/docker-${containerId}.scope`,
    `/sys/fs/cgroup/docker/${containerId}`,
  ]) {
    try {
      const v1 = existsSync(join(base, 'memory.usage_in_bytes'));
      const usage = Number(readFileSync(join(base, v1 ? 'memory.usage_in_bytes' : 'memory.current'), 'utf8'));
      const stat = readFileSync(join(base, 'memory.stat'), 'utf8');
      const inactive = Number(/^(?:total_)?inactive_file (\d+)$/m.exec(stat)?.[1] ?? 0);
      return (usage - inactive) / 2 ** 20;
    } catch {
      // not this cgroup layout
    }
  }
  return Number.NaN;
}

/**
 * N running instances under one runlog home. recovery.50 and recovery.200 share it when both run in one
 * process (recovery.200 adds 150 to recovery.50's 50): spawning and removing containers is what takes time
 * on this machine (~1 s each). It is removed when a bench fails, when a smaller fleet is wanted, or when the
 * process has nothing left to do (beforeExit).
 */
interface Fleet {
  docker: Docker;
  root: string;
  home: string;
  network: string;
  options: RunlogOptions;
  rl: Runlog | null;
  ids: string[];
  /** Container id per instance when it was spawned. */
  containers: Map<string, string>;
  startedAt: Map<string, string>;
}

let fleet: Fleet | null = null;
let exitHook = false;
let tearing: Promise<void> | null = null;
/** Append stamps of the current restart, from the FaultHook the host calls before and after every append. */
let stamps: { point: string; type: string; t: number }[] | null = null;

function teardown(f: Fleet): Promise<void> {
  tearing ??= removeFleet(f).finally(() => (tearing = null));
  return tearing;
}

async function removeFleet(f: Fleet): Promise<void> {
  await closeWithin(f.rl);
  f.rl = null;
  const mine = await f.docker
    .listContainers({ all: true, filters: { label: ['runlog.bench=1', `runlog.home=${f.home}`] } })
    .catch(() => []);
  await mapConcurrent(mine, 16, async (c) => {
    await f.docker
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => undefined);
  });
  const nets = await f.docker.listNetworks({ filters: { name: [f.network] } }).catch(() => []);
  for (const x of nets.filter((y) => y.Name === f.network))
    await f.docker
      .getNetwork(x.Id)
      .remove()
      .catch(() => undefined);
  rmSync(f.root, { recursive: true, force: true });
  if (fleet === f) fleet = null;
}

/** Grows (or creates) the fleet to n running instances; returns what the growth cost. */
async function fleetOf(
  n: number,
  log: (m: string) => void,
): Promise<{ f: Fleet; spawned: number; setupMs: number; reused: number }> {
  if (fleet && fleet.ids.length > n) await teardown(fleet);
  if (!fleet) {
    const docker = new Docker({ socketPath: DOCKER_SOCKET });
    await requireParts(docker);
    const root = mkdtempSync(join(tmpdir(), 'runlog-bench-recovery-'));
    const home = join(root, 'home');
    mkdirSync(home);
    writeTinyApp(join(root, 'tiny-app'));
    const network = `runlog-bench-rec-${process.pid}`;
    fleet = {
      docker,
      root,
      home,
      network,
      rl: null,
      ids: [],
      containers: new Map(),
      startedAt: new Map(),
      options: {
        home,
        labels: { ...BENCH_LABELS },
        containerNetwork: network,
        portRange: { min: 21000, max: 21999 },
        healthTimeoutMs: 30_000,
        killGraceMs: 2000,
        log: () => undefined,
        faults: (point, detail) => {
          if (stamps && (point === 'before-append' || point === 'after-append'))
            stamps.push({ point, type: detail.eventType ?? '', t: nowMs() });
        },
      },
    };
    if (!exitHook) {
      exitHook = true;
      process.on('beforeExit', () => {
        if (!fleet || tearing) return;
        process.stderr.write(`[bench] recovery: removing ${fleet.ids.length} containers\n`);
        void teardown(fleet);
      });
    }
  }
  const f = fleet;
  f.rl ??= await createRunlog(f.options);
  const rl = f.rl;
  const reused = f.ids.length;
  const fresh = Array.from({ length: n - reused }, (_, i) => `bench-rec${process.pid}-${reused + i}`);
  const spawnOne = async (dir: string, instanceId: string) => {
    const view = await rl.spawnApp({ appDir: dir, sandbox: 'container', instanceId });
    if (view.state !== 'running') throw new Error(`${instanceId} ended ${view.state}`);
    f.ids.push(instanceId);
    f.containers.set(instanceId, String((view.context as { containerId?: string }).containerId));
  };
  const t0 = nowMs();
  // The first spawn installs the app into the workspace; the others name the installed copy, so spawnApp
  // does not re-copy it while other instances start from it (a concurrent re-copy makes a starting
  // container miss entrypoint.sh: see the report).
  const installed = join(f.home, 'workspace', 'apps', APP_ID);
  if (!existsSync(installed) && fresh.length > 0) await spawnOne(join(f.root, 'tiny-app'), fresh.shift()!);
  await mapConcurrent(fresh, SPAWN_CONCURRENCY, (id) => spawnOne(installed, id));
  await rl.idle();
  const setupMs = nowMs() - t0;
  const seen = await rawList(f.docker, f.home, true);
  if (seen.ids.size !== n) throw new Error(`Docker lists ${seen.ids.size} instance containers, expected ${n}`);
  for (const [id, c] of seen.ids) f.startedAt.set(id, c.startedAt);
  log(
    `recovery: ${n} instances running (${n - reused} spawned in ${(setupMs / 1000).toFixed(1)} s, ` +
      `${SPAWN_CONCURRENCY} at a time${reused ? `; ${reused} kept from the previous bench` : ''})`,
  );
  return { f, spawned: n - reused, setupMs, reused };
}

function recoveryBench(fullN: number, smokeN: number, maxRounds: number | null): Bench {
  const name = `recovery.${fullN}`;
  return {
    name,
    needs: 'Docker, the app-base image and the Debian rootfs',
    async run(opts): Promise<BenchResult> {
      const { rounds: requested, log } = opts;
      const { n, settleMs } = sizes(opts, { full: { n: fullN, settleMs: 3000 }, smoke: { n: smokeN, settleMs: 500 } });
      const rounds = maxRounds === null ? requested : Math.min(requested, maxRounds);
      let grown: Awaited<ReturnType<typeof fleetOf>> | null = null;
      try {
        grown = await fleetOf(n, log);
        const { f } = grown;
        // Spawning the fleet leaves Docker and the apps busy for a while (containers settling, health polls):
        // let that pass, then restart once unmeasured, so round 1 is not measuring the setup's tail.
        await new Promise((r) => setTimeout(r, settleMs));
        if (!(await closeWithin(f.rl))) throw new Error(`${name}: rl.close() did not finish within 30 s`);
        f.rl = await createRunlog(f.options);
        await f.rl.idle();
        const mem = f.ids.map((id) => containerMemMib(f.containers.get(id)!)).filter((x) => Number.isFinite(x));
        const ours: number[] = [];
        const toRunning: number[] = [];
        const beforeFirstAdopt: number[] = [];
        const adoptPhase: number[] = [];
        const appendMs: number[] = [];
        const raw: number[] = [];
        const rawParallel: number[] = [];
        const measureRaw = async () => {
          let t = nowMs();
          const listed = await rawList(f.docker, f.home, false);
          raw.push(nowMs() - t);
          if (listed.ids.size !== n)
            throw new Error(`${name}: raw list found ${listed.ids.size} containers, expected ${n}`);
          t = nowMs();
          await rawList(f.docker, f.home, true);
          rawParallel.push(nowMs() - t);
        };
        for (let r = 1; r <= rounds; r++) {
          const live = f.rl;
          const adoptedBefore = new Map(
            await Promise.all(
              f.ids.map(
                async (id) =>
                  [id, (await live.events(id)).filter((e) => e.type === 'instance.adopted').length] as const,
              ),
            ),
          );
          if (!(await closeWithin(f.rl))) throw new Error(`${name}: rl.close() did not finish within 30 s`);
          f.rl = null;
          if (r % 2) await measureRaw(); // alternate: raw before the restart on odd rounds, after it on even ones
          stamps = [];
          const start = nowMs();
          f.rl = await createRunlog(f.options);
          const end = nowMs();
          ours.push(end - start);
          const during = stamps.filter((x) => x.t <= end);
          stamps = null;
          const adopted = during.filter((x) => x.type === 'instance.adopted');
          beforeFirstAdopt.push(adopted[0]!.t - start);
          adoptPhase.push(end - adopted[0]!.t);
          // Time inside append (transaction + fsync) for every event appended while createRunlog ran.
          let inAppend = 0;
          for (let i = 0; i + 1 < during.length; i++)
            if (during[i]!.point === 'before-append' && during[i + 1]!.point === 'after-append')
              inAppend += during[i + 1]!.t - during[i]!.t;
          appendMs.push(inAppend);
          await f.rl.idle();
          toRunning.push(nowMs() - start);
          if (r % 2 === 0) await measureRaw();
          // Checks: every instance adopted once more with its original container, running again, spawned only
          // once, and Docker still shows the same containers with the same start times (nothing restarted).
          const seen = await rawList(f.docker, f.home, true);
          for (const id of f.ids) {
            const events = await f.rl.events(id);
            const adopted = events.filter((e) => e.type === 'instance.adopted');
            if (adopted.length !== adoptedBefore.get(id)! + 1)
              throw new Error(
                `${name}: ${id} has ${adopted.length - adoptedBefore.get(id)!} new instance.adopted events after a restart`,
              );
            if ((adopted.at(-1)!.data as { containerId?: string }).containerId !== f.containers.get(id))
              throw new Error(`${name}: ${id} was adopted with another container`);
            if (events.filter((e) => e.type === 'instance.spawned').length !== 1)
              throw new Error(`${name}: ${id} was spawned again`);
            if ((await f.rl.inspect(id)).state !== 'running')
              throw new Error(`${name}: ${id} is ${(await f.rl.inspect(id)).state} after recovery`);
            const now = seen.ids.get(id);
            if (!now || now.containerId !== f.containers.get(id) || now.startedAt !== f.startedAt.get(id))
              throw new Error(`${name}: ${id}'s container changed or restarted`);
          }
          log(
            `${name} round ${r}: createRunlog ${ours.at(-1)!.toFixed(0)} ms ` +
              `(all running ${toRunning.at(-1)!.toFixed(0)} ms), raw list+inspect ${raw.at(-1)!.toFixed(0)} ms ` +
              `(parallel ${rawParallel.at(-1)!.toFixed(0)} ms)`,
          );
        }
        // Detach (the containers keep running for the next bench or the exit teardown): an open supervisor
        // holds Docker streams that would keep the process alive.
        if (!(await closeWithin(f.rl))) throw new Error(`${name}: rl.close() did not finish within 30 s`);
        f.rl = null;
        const v = median(ours);
        const b = median(raw);
        return {
          name,
          value: round(v),
          unit: 'ms',
          baseline: round(b),
          ratio: round(v / b),
          notes: {
            target: '≤ 1.5×',
            to_all_running_ms: round(median(toRunning)),
            start_to_first_adopted_ms: round(median(beforeFirstAdopt)),
            adopting_ms: round(median(adoptPhase)),
            in_append_ms: round(median(appendMs)),
            appends_per_restart:
              `${n} instance.adopted + up to ${n} instance.running (reattach), group-committed ` +
              `(synchronous=FULL transactions shared by the events decided in one turn of the event loop)`,
            raw_parallel_inspect_ms: round(median(rawParallel)),
            ratio_vs_parallel: round(v / median(rawParallel)),
            setup:
              `${grown.spawned} × spawnApp in ${round(grown.setupMs / 1000)} s ` +
              `(tiny Perl app, container, ${SPAWN_CONCURRENCY} at a time)` +
              `${grown.reused ? ` + ${grown.reused} kept from recovery.50` : ''}`,
            container_mem_mib: round(median(mem)),
            rounds:
              maxRounds !== null && rounds < requested
                ? `${rounds} (capped at ${maxRounds}: setting up ${n} containers dominates)`
                : String(rounds),
          },
        };
      } catch (e) {
        if (fleet) await teardown(fleet);
        throw e;
      }
    },
  };
}

export const recoveryBenches: Bench[] = [recoveryBench(50, 2, null), recoveryBench(200, 4, 3)];
