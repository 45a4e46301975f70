import { defineConfig } from 'vitest/config';

// The tiers, one folder each: the folder a test file sits in decides where it runs, nothing is listed by hand.
// `test/unit/`: no Docker, no network, no watchers, only temp files (scripts/unit-offline.sh runs it with every real
// part out of reach, in CI too). `test/int/`: the real parts (Docker, proot, registry, PDS, PostgreSQL), in two lanes:
// `int` (everything but test/int/cluster/; the PostgreSQL store and one supervisor on it are test/int/postgres/) and
// `int-cluster` (test/int/cluster/: several nodes on one PostgreSQL log, which wait mostly on lease TTLs).
// `test/e2e/`: the long fault suites (chaos, the seeded cluster chaos, kill -9 of a supervisor holding 50
// containers, a Docker Engine restart, a store crash), real parts too. `test/contract/`: the suites every
// store passes, one file per store; there the suffix says the tier (`*.unit.test.ts`: memory and SQLite,
// `*.int.test.ts`: PostgreSQL). Within each real-parts project files run one at a time: they share one Docker daemon
// and 2 cores. `npm test` (scripts/test.sh) runs unit and e2e, then the two int lanes side by side; `vitest run` alone
// runs every project, the real-parts ones one file at a time.
const E2E = ['test/e2e/**/*.test.ts'];
const INT_CLUSTER = ['test/int/cluster/**/*.test.ts'];

const realParts = {
  testTimeout: 120_000,
  hookTimeout: 180_000,
  // expect.poll waits for real parts (a browser's first render, a daemon's event): its 1 s default is a
  // timing assertion in disguise, and failed a CI run when the machine was busy.
  expect: { poll: { timeout: 15_000 } },
  fileParallelism: false,
};

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/contract/**/*.unit.test.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'int',
          include: ['test/int/**/*.test.ts', 'test/contract/**/*.int.test.ts'],
          exclude: INT_CLUSTER,
          ...realParts,
        },
      },
      // Its supervisors hand PRoot instances ports of their own ($RUNLOG_PORTS; `serve --ports`): the `int` lane's
      // instances, running at the same time on the default 4100–4999, never take theirs.
      { test: { name: 'int-cluster', include: INT_CLUSTER, ...realParts, env: { RUNLOG_PORTS: '5100-5999' } } },
      // After unit (a group of its own, one file at a time): an e2e file never shares the daemon with another file.
      { test: { name: 'e2e', include: E2E, ...realParts, sequence: { groupOrder: 1 } } },
    ],
  },
});
