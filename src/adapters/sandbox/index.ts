// The sandbox adapters behind the SandboxRunner port.
export type { SandboxRunner, SpawnOptions, SpawnResult, ExitInfo, ExitCallback, LogLine, OrphanRecord } from './sandbox-runner.ts';
export { ProotRunner, type ProotRunnerConfig } from './proot-runner.ts';
export { ContainerRunner, containerName, DEFAULT_NETWORK, type ContainerRunnerConfig } from './container-runner.ts';
export { SandboxError } from './errors.ts';
export { homeLayout, INSTANCE_ID, type HomeLayout } from './layout.ts';
export { SANDBOX_ENV_KEYS, SANDBOX_PATH } from './env.ts';
