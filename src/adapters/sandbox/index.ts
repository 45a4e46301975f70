// The sandbox adapters behind the AppSandboxRunner port.
export type {
  AppSandboxRunner,
  SpawnOptions,
  SpawnResult,
  ExitInfo,
  ExitCallback,
  LogLine,
  OrphanRecord,
} from './app-sandbox-runner.ts';
export { ProotRunner, type ProotRunnerConfig } from './proot-runner.ts';
export { ContainerRunner, DEFAULT_NETWORK, type ContainerRunnerConfig } from './container-runner.ts';
export { containerName } from './container-identity.ts';
export { SandboxError } from './errors.ts';
export { homeLayout, INSTANCE_ID, type HomeLayout } from './layout.ts';
export { SANDBOX_ENV_KEYS, SANDBOX_PATH } from './env.ts';
