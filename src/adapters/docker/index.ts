// The Docker adapter's public surface: runlog's own types only (no dockerode type leaves src/adapters/docker).
// docker-port.ts is the port (types), dockerode-engine.ts its one implementation.
export { createDockerEngine, normalizePlatform } from './dockerode-engine.ts';
export {
  DEFAULT_SOCKET_PATH,
  ZERO_TIME,
  type DockerEngine,
  type DockerEngineOptions,
  type Platform,
  type EngineVersion,
  type ImageInfo,
  type VolumeInfo,
  type ContainerInfo,
  type ContainerState,
  type ContainerSummary,
  type PullProgress,
  type ContainerCreateBody,
  type MountSpec,
  type PathStat,
  type WaitHandle,
  type NetworkInfo,
  type EngineEvent,
  type EngineEventOptions,
  type EngineEventSubscription,
} from './docker-port.ts';
export {
  DockerUnavailableError,
  DockerApiError,
  DockerNotFoundError,
  DockerConflictError,
  DockerTimeoutError,
  ImagePullError,
  MaterializationError,
  ContainerStateError,
} from './errors.ts';
export {
  createMaterializer,
  type Materializer,
  type MaterializerOptions,
  type Materialized,
  type RuntimeRequest,
  type AdditionRequest,
  type CodeRequest,
} from './materializer.ts';
export {
  LABEL_CACHE_KEY,
  LABEL_MATERIALIZING,
  LABEL_SEAL_FOR,
  LABEL_VOLUME_KIND,
} from './materialized-volume-labels.ts';
export {
  type MaterializeKind,
  type MaterializeProgress,
  type MaterializeStep,
  type ProgressHandler,
} from './materialize-steps.ts';
export {
  createExecutionSandbox,
  PROTOCOL_VERSION,
  type ExecutionSandbox,
  type InvocationEnvelope,
  type InvokeOptions,
  type CollectOptions,
} from './execution-sandbox.ts';
export {
  executionContainerBody,
  DEFAULT_SANDBOX_USER,
  INVOCATION_LABEL,
  PRESTART_LABEL,
  type SandboxPolicy,
  type ExecutionContainerSpec,
} from './execution-container-body.ts';
export { type InvocationResult, type InvocationFailureReason } from './invocation-result.ts';
export { DEFAULT_OUTPUT_LIMITS, type Frame, type OutputLimits, type ProtocolError } from './frames.ts';
export {
  sandboxCommand,
  ADDITION_EXPORT_PATH,
  ADDITIONS_MOUNT,
  APP_MOUNT,
  RUNTIME_MOUNT,
  WORK_MOUNT,
  MATERIALIZE_TARGET,
  type Launcher,
} from './layout.ts';
