import { defineConfig } from 'vitest/config';

// Three tiers. `unit`: no Docker, no network, no watchers, only temp files (scripts/unit-offline.sh runs it with
// every real part out of reach, in CI too). `int`: the real parts (Docker, proot, registry, PDS, PostgreSQL).
// `e2e`: the long fault suites (chaos, kill -9 of a supervisor holding 50 containers, a Docker Engine restart, a
// store crash), real parts too. `npm test` runs all three; int and e2e files run one at a time: they share one
// Docker daemon and 2 cores.
const E2E = ['test/chaos.int.test.ts', 'test/recovery-kill50.int.test.ts', 'test/recovery-docker-restart.int.test.ts', 'test/store-crash.int.test.ts'];

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
          include: ['test/**/*.unit.test.ts'],
          testTimeout: 20_000,
        },
      },
      { test: { name: 'int', include: ['test/**/*.int.test.ts'], exclude: E2E, ...realParts } },
      // After unit and int (a group of its own): an e2e file never shares the Docker daemon with an int file.
      { test: { name: 'e2e', include: E2E, ...realParts, sequence: { groupOrder: 1 } } },
    ],
  },
});
