import { defineConfig } from 'vitest/config';

// Two projects: `unit` (no IO beyond temp files, runs in seconds) and `int` (real Docker, proot,
// registry, PDS). Integration files run one at a time: they share one Docker daemon and 2 cores.
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
      {
        test: {
          name: 'int',
          include: ['test/**/*.int.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // expect.poll waits for real parts (a browser's first render, a daemon's event): its 1 s default is a
          // timing assertion in disguise, and failed a CI run when the machine was busy.
          expect: { poll: { timeout: 15_000 } },
          fileParallelism: false,
        },
      },
    ],
  },
});
