// A container's CPU used so far: from its cgroup's counter when this host is the daemon's, else the Engine's stats.
//
// The Engine's stats endpoint (`stream=false&one-shot=true`) answers with the cgroup's counters, but on Engine
// 20.10 even a one-shot request subscribes to the daemon's stats collector and waits for its next tick: up to a
// second per reading, where an inspect takes a millisecond or two. The sandbox pool reads a pre-started sandbox's
// CPU at its claim, beside that inspect, and must not make the claim slower; so the counter is read from the
// cgroup filesystem when the container's cgroup is there (the daemon runs on this host: the usual local socket),
// under the layouts Docker uses (cgroup v1 and v2, cgroupfs and systemd drivers), and from the endpoint otherwise.
// The pool uses it to bound and account what a pre-started sandbox runs before its envelope (sandbox-pool.ts).
import type Docker from 'dockerode';
import { readFileSync } from 'node:fs';

interface StatsAnswer {
  cpu_stats?: { cpu_usage?: { total_usage?: unknown } };
}

const CGROUP_ROOT = '/sys/fs/cgroup';
const FULL_ID = /^[0-9a-f]{64}$/;

/** Where a container's CPU counter is, per layout: v1 `cpuacct.usage` (ns), v2 `cpu.stat` usage_usec (µs). */
const LAYOUTS: readonly { path: (id: string) => string; ns: (text: string) => number | undefined }[] = (() => {
  const v1 = (text: string) => parseCount(text.trim());
  const v2 = (text: string) => {
    const m = /^usage_usec (\d+)$/m.exec(text);
    const us = m ? parseCount(m[1]!) : undefined;
    return us === undefined ? undefined : us * 1000;
  };
  return [
    { path: (id) => `cpuacct/docker/${id}/cpuacct.usage`, ns: v1 },
    { path: (id) => `cpu,cpuacct/docker/${id}/cpuacct.usage`, ns: v1 },
    { path: (id) => `cpuacct/system.slice/docker-${id}.scope/cpuacct.usage`, ns: v1 },
    { path: (id) => `cpu,cpuacct/system.slice/docker-${id}.scope/cpuacct.usage`, ns: v1 },
    { path: (id) => `system.slice/docker-${id}.scope/cpu.stat`, ns: v2 },
    { path: (id) => `docker/${id}/cpu.stat`, ns: v2 },
  ];
})();

function parseCount(s: string): number | undefined {
  if (!/^\d{1,19}$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** The layout that answered last is tried first. */
let lastLayout = 0;

/**
 * The counter from the cgroup filesystem; undefined when this host has no cgroup of that container. Read
 * synchronously: a cgroup file is a few bytes the kernel formats in memory (microseconds), where the thread
 * pool's four hops (open, stat, read, close) could wait behind other I/O longer than the inspect it sits beside.
 */
export function cgroupCpuUsageNs(id: string, root = CGROUP_ROOT): number | undefined {
  if (!FULL_ID.test(id)) return undefined;
  for (let i = 0; i < LAYOUTS.length; i++) {
    const at = (lastLayout + i) % LAYOUTS.length;
    const layout = LAYOUTS[at]!;
    let text: string | null = null;
    try {
      text = readFileSync(`${root}/${layout.path(id)}`, 'utf8');
    } catch {
      text = null;
    }
    const ns = text === null ? undefined : layout.ns(text);
    if (ns === undefined) continue;
    lastLayout = at;
    return ns;
  }
  return undefined;
}

const statusOf = (err: unknown): unknown => (err as { statusCode?: unknown } | null)?.statusCode;

/**
 * CPU time used by the container so far, in ns; null when it is gone (404). A container that is not running
 * has no cgroup and no counters: 0. Any other failure of the endpoint goes to `fail` (the engine's typed errors).
 */
export async function containerCpuUsageNs(
  docker: Docker,
  id: string,
  fail: (operation: string, err: unknown) => never,
  cgroupRoot = CGROUP_ROOT,
): Promise<number | null> {
  const local = cgroupCpuUsageNs(id, cgroupRoot);
  if (local !== undefined) return local;
  let answer: StatsAnswer;
  try {
    answer = (await docker.getContainer(id).stats({ stream: false, 'one-shot': true })) as StatsAnswer;
  } catch (err) {
    if (statusOf(err) === 404) return null;
    fail(`read the stats of container ${id}`, err);
  }
  const total = answer.cpu_stats?.cpu_usage?.total_usage;
  return typeof total === 'number' && Number.isFinite(total) && total > 0 ? total : 0;
}
