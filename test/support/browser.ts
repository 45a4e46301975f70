// For the inspector's browser test (and the server tests): a runlog whose actors have real recorded
// histories, driven by fake effect handlers (no Docker, no PDS), and Debian's chromium via playwright-core.
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { createRunlog, type Runlog } from '../../src/supervisor/runlog.ts';
import type { EffectHandlers } from '../../src/supervisor/host/actor-host.ts';
import type { KindNewEvent } from '../../src/domain/events.ts';
import type { Materialized, Resolved } from '../../src/domain/execution-events.ts';
import type { InstanceEventData } from '../../src/domain/instance-events.ts';
import type { InstanceSpec } from '../../src/machines/instance.machine.ts';
import { partial } from './partial.ts';
import { runlogInternals } from '../../src/supervisor/runlog-internals.ts';

export const CHROMIUM = '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Debian's chromium. Fails (never skips) with the command that installs it. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: run \`npm run setup\` (or \`bash scripts/setup-browser.sh\`) as root to install Debian's chromium`,
    );
  }
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

export const instanceSpec = (over: Partial<InstanceSpec> = {}): InstanceSpec => ({
  instanceId: 'inst_web',
  appId: 'com.example.notes',
  appDir: '/srv/apps/notes',
  sandbox: 'proot',
  runtime: 'node',
  tools: ['curl'],
  lifecycleBasePath: '/_runlog',
  restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 1000, maxBackoffMs: 30_000, resetAfterMs: 600_000 },
  ...over,
});

export const CODE_CID = 'bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy';
export const RUNTIME_CID = 'bafyreidfcqkx5rq7uyxgbbd6zk6hk2d4bnz4tftpptq3e5cenuo2ivvqsi';
export const IMAGE = `localhost:5000/runtime-node@sha256:${'3f'.repeat(32)}`;

/** Fake adapters: every effect succeeds at once by dispatching what a real adapter would report. */
export function fakeEffects(): {
  instance: Partial<EffectHandlers<'instance'>>;
  execution: Partial<EffectHandlers<'execution'>>;
} {
  let pid = 4200;
  return {
    instance: {
      spawn: async (p, ctx) => {
        const spec = p.spec;
        await ctx.dispatch({
          type: 'instance.spawned',
          data: { pid: ++pid, host: '127.0.0.1', port: spec.port ?? 41000 + (pid % 100) },
        });
        await ctx.dispatch({ type: 'instance.healthy', data: { identity: 'match' } });
      },
      callLifecycle: async (p, ctx) => {
        if (p.hooks.includes('onStart')) await ctx.dispatch({ type: 'instance.running', data: {} });
      },
      stopSandbox: async (_p, ctx) => {
        await ctx.dispatch({ type: 'instance.exited', data: { exitCode: 0, signal: 'SIGTERM' } });
      },
      scheduleRestart: async (p, ctx) => {
        await ctx.dispatch({
          type: 'instance.restart-scheduled',
          data: partial<InstanceEventData['instance.restart-scheduled']>({
            attempt: p.attempt,
            delayMs: p.delayMs ?? 0,
            dueAt: new Date(Date.now() + Number(p.delayMs)).toISOString(),
          }),
        });
        await ctx.dispatch({
          type: 'instance.restart-due',
          data: partial<InstanceEventData['instance.restart-due']>({ attempt: p.attempt }),
        });
      },
      // The restart came due at once above: no timer is armed for it.
      armRestart: () => undefined,
      forceKill: () => undefined,
      releasePort: () => undefined,
      provisionTools: () => undefined,
    },
    execution: {
      resolve: async (p, ctx) => {
        const request = p.request;
        await ctx.dispatch({
          type: 'execution.step',
          data: { name: 'identity-resolved', detail: { did: 'did:plc:alice', pds: 'http://127.0.0.1:2583' } },
        });
        if (request.uri.includes('missing')) {
          await ctx.dispatch({
            type: 'execution.failed',
            data: { reason: 'resolution', code: 'RECORD_NOT_FOUND', message: `no record at ${request.uri}` },
          });
          return;
        }
        await ctx.dispatch({
          type: 'execution.resolved',
          data: partial<Resolved>({
            codeUri: request.uri,
            codeCid: CODE_CID,
            runtimeUri: 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.runtime/node22',
            runtimeCid: RUNTIME_CID,
            image: IMAGE,
            limits: partial<Resolved['limits']>({ memoryMb: 256, cpus: 0.5, timeoutMs: 30_000, pids: 64 }),
          }),
        });
      },
      materialize: async (_p, ctx) => {
        await ctx.dispatch({ type: 'execution.step', data: { name: 'runtime-pulled', detail: { ms: 412 } } });
        await ctx.dispatch({
          type: 'execution.materialized',
          data: partial<Materialized>({
            runtimeVolume: 'runlog-rt-3f3f3f3f3f3f',
            codeVolume: 'runlog-code-bafyreigh2aki',
            runtimeDigest: `sha256:${'3f'.repeat(32)}`,
            codeDigest: `sha256:${'9c'.repeat(32)}`,
          }),
        });
      },
      createSandbox: async (_p, ctx) => {
        await ctx.dispatch({ type: 'execution.started', data: { containerId: 'c0ffee'.repeat(10) + 'abcd' } });
      },
      invoke: async (_p, ctx) => {
        await ctx.dispatch({
          type: 'execution.succeeded',
          data: { output: { sum: 42, items: ['a', 'b'] }, outputHash: `sha256:${'ab'.repeat(32)}` },
        });
      },
      cleanup: () => undefined,
    },
  };
}

export interface Seeded {
  rl: Runlog;
  /** Running, after a crash and one restart, with a tool granted. */
  instanceId: string;
  /** Stopped. */
  stoppedId: string;
  executionId: string;
  failedExecutionId: string;
}

const request = (executionId: string, uri: string): KindNewEvent<'execution'> => ({
  type: 'execution.requested',
  data: {
    request: { executionId, uri, handler: 'add', input: { a: 40, b: 2 }, callerDid: 'did:plc:bob', timeoutMs: 30_000 },
    deadline: new Date(Date.now() + 30_000).toISOString(),
  },
});

/** A supervising runlog (fake effects) holding two instances and two executions with full histories. */
export async function seededRunlog(home: string): Promise<Seeded> {
  // No Docker reconciliation, engine watch or workspace watching: only the fake effects act on these actors.
  const rl = await createRunlog({
    home,
    effects: fakeEffects(),
    reconcile: false,
    engineWatch: false,
    watchApps: false,
    log: () => undefined,
  });
  await runlogInternals(rl).host.create('instance', 'inst_web', {
    type: 'instance.requested',
    data: { spec: instanceSpec() },
  });
  await rl.idle();
  await rl.send('instance', 'inst_web', { type: 'instance.tool-granted', data: { tool: 'git' } });
  await rl.send('instance', 'inst_web', {
    type: 'instance.crashed',
    data: { reason: 'exit', exitCode: 137, signal: 'SIGKILL', message: 'exited with 137 (out of memory?)' },
  });
  await rl.idle();

  await runlogInternals(rl).host.create('instance', 'inst_old', {
    type: 'instance.requested',
    data: {
      spec: instanceSpec({
        instanceId: 'inst_old',
        appId: 'com.example.todo',
        appDir: '/srv/apps/todo',
        sandbox: 'container',
        restart: { ...instanceSpec().restart, policy: 'never' },
      }),
    },
  });
  await rl.idle();
  await rl.send('instance', 'inst_old', { type: 'instance.stop-requested', data: {} });
  await rl.idle();

  const executionId = 'exec_01JZ8Q4V2M7K3N5P6R8S9T0W1X';
  await runlogInternals(rl).host.create(
    'execution',
    executionId,
    request(executionId, 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/add'),
  );
  await rl.idle();
  const failedExecutionId = 'exec_01JZ8Q5A7B8C9D0E1F2G3H4J5K';
  await runlogInternals(rl).host.create(
    'execution',
    failedExecutionId,
    request(failedExecutionId, 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/missing'),
  );
  await rl.idle();
  return { rl, instanceId: 'inst_web', stoppedId: 'inst_old', executionId, failedExecutionId };
}
