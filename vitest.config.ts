import { defineConfig } from 'vitest/config';

// The tiers. `unit`: no Docker, no network, no watchers, only temp files (scripts/unit-offline.sh runs it with
// every real part out of reach, in CI too). `int` and `int-pg`: the real parts (Docker, proot, registry, PDS,
// PostgreSQL); `int-pg` holds the files that need PostgreSQL (the cluster and the PostgreSQL store). `e2e`: the long
// fault suites (chaos, the seeded cluster chaos, kill -9 of a supervisor holding 50 containers, a Docker Engine
// restart, a store crash), real parts too. Within each real-parts project files run one at a time: they share one Docker daemon and 2 cores.
// `npm test` (scripts/test.sh) runs unit and e2e, then the two int lanes side by side; `vitest run` alone runs
// every project, the real-parts ones one file at a time.
const E2E = ['test/chaos.int.test.ts', 'test/cluster-chaos.int.test.ts', 'test/recovery-kill50.int.test.ts', 'test/recovery-docker-restart.int.test.ts', 'test/store-crash.int.test.ts'];
// Files that need PostgreSQL: by name (`cluster-*`, `*-pg*`), so a new one joins its lane without being listed.
const PG = ['test/**/cluster-*.int.test.ts', 'test/**/*-pg.int.test.ts', 'test/**/*-pg-*.int.test.ts'];

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
      { test: { name: 'int', include: ['test/**/*.int.test.ts'], exclude: [...E2E, ...PG], ...realParts } },
      // Its supervisors hand PRoot instances ports of their own ($RUNLOG_PORTS; `serve --ports`): the `int` lane's
      // instances, running at the same time on the default 4100–4999, never take theirs.
      { test: { name: 'int-pg', include: PG, exclude: E2E, ...realParts, env: { RUNLOG_PORTS: '5100-5999' } } },
      // After unit (a group of its own, one file at a time): an e2e file never shares the daemon with another file.
      { test: { name: 'e2e', include: E2E, ...realParts, sequence: { groupOrder: 1 } } },
    ],
  },
});
