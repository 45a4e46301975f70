// A container's CPU counter read from the cgroup filesystem (container-stats.ts), under each layout Docker uses,
// against a cgroup tree of files made here: v1 cpuacct.usage in ns, v2 cpu.stat usage_usec in µs. A container
// whose cgroup is not on this host is left to the Engine's stats endpoint (undefined here).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cgroupCpuUsageNs } from '../../../src/adapters/docker/container-stats.ts';

const root = mkdtempSync(join(tmpdir(), 'runlog-cgroup-'));
const id = (c: string) => c.repeat(64);
function put(rel: string, text: string): void {
  mkdirSync(dirname(join(root, rel)), { recursive: true });
  writeFileSync(join(root, rel), text);
}
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('cgroup CPU counter of a container', () => {
  it('is read under the cgroup v1 and v2 layouts of both cgroup drivers, in ns', () => {
    put(`cpuacct/docker/${id('a')}/cpuacct.usage`, '1234567890\n');
    put(`cpu,cpuacct/system.slice/docker-${id('b')}.scope/cpuacct.usage`, '42\n');
    put(`system.slice/docker-${id('c')}.scope/cpu.stat`, 'usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n');
    put(`docker/${id('d')}/cpu.stat`, 'usage_usec 7\n');
    expect(cgroupCpuUsageNs(id('a'), root)).toBe(1_234_567_890);
    expect(cgroupCpuUsageNs(id('b'), root)).toBe(42);
    expect(cgroupCpuUsageNs(id('c'), root)).toBe(2_500_000);
    expect(cgroupCpuUsageNs(id('d'), root)).toBe(7000);
    expect(cgroupCpuUsageNs(id('a'), root)).toBe(1_234_567_890);
  });

  it('is not found for a container without a cgroup here, an id that is not a full id, or a counter that is not a number', () => {
    expect(cgroupCpuUsageNs(id('e'), root)).toBeUndefined();
    put('cpuacct/docker/abc/cpuacct.usage', '5\n');
    expect(cgroupCpuUsageNs('abc', root)).toBeUndefined();
    expect(cgroupCpuUsageNs(`../${id('a')}`, root)).toBeUndefined();
    put(`cpuacct/docker/${id('f')}/cpuacct.usage`, 'lots\n');
    expect(cgroupCpuUsageNs(id('f'), root)).toBeUndefined();
  });
});
