// The instance machine's vocabulary: every event it takes, each with its data type. The machine reads these
// types (no untyped `data` record cast), and whoever dispatches one is checked against them. Fields a
// log written by an older runlog may lack are optional: the upcasters (store/upcasters.ts) lift what they can,
// the machine defaults the rest, so stored histories keep replaying.
import type { SandboxKind } from './manifest.ts';

export type { SandboxKind };

export interface RestartPolicy {
  policy: 'never' | 'on-failure';
  /** Give up after this many consecutive restarts. */
  maxRestarts: number;
  /** First delay; doubles with each consecutive restart (kubelet-style). */
  backoffMs: number;
  maxBackoffMs: number;
  /** A run at least this long resets the consecutive-restart count. */
  resetAfterMs: number;
}

export const DEFAULT_RESTART: RestartPolicy = {
  policy: 'never',
  maxRestarts: 5,
  backoffMs: 1000,
  maxBackoffMs: 60_000,
  resetAfterMs: 600_000,
};

export interface InstanceSpec {
  instanceId: string;
  appId: string;
  appDir: string;
  sandbox: SandboxKind;
  runtime: string;
  tools: string[];
  lifecycleBasePath: string;
  restart: RestartPolicy;
  port?: number;
}

export type CrashReason =
  | 'exit'
  | 'identity-mismatch'
  | 'health-timeout'
  | 'spawn-error'
  | 'lifecycle-failed'
  | 'supervisor-restart'
  /** Its node's supervisor is gone (a cluster survivor took its lease): the restart policy restarts it on a live node. */
  | 'node-lost'
  /**
   * Its node fenced itself (no lease renewal answered for most of the lease TTL) and stopped the sandbox before the
   * lease could expire; the node kept the lease, and the restart policy restarts it there.
   */
  | 'self-fenced'
  | 'effect-failed';

/**
 * Why an instance was suspended: its supervisor stopped gracefully (SIGTERM, Ctrl-C, close()) and its PRoot
 * sandbox, a child of the supervisor, stopped with it. Not the app's failure: no crash is counted, and the next
 * start of a supervisor spawns it again.
 */
export type SuspendReason = 'supervisor-stop';

/** What the reconciler saw that made it record an event (kept with the event, for `runlog inspect`). */
export type Evidence = Record<string, unknown>;

/** Where a running sandbox is: what `instance.spawned`, `instance.adopted` and `instance.discovered` carry. */
export interface SandboxLocation {
  pid?: number | null;
  containerId?: string | null;
  host?: string | null;
  port?: number | null;
}

/** A crash, a failed spawn, a failed lifecycle hook: what the restart policy is asked about. */
export interface CrashData {
  reason?: CrashReason;
  message?: string;
  code?: string;
  exitCode?: number | null;
  signal?: string | null;
  /** The effect that threw, when the crash is an effect's failure (actor-host onEffectError). */
  effect?: string;
  evidence?: Evidence;
}

export interface ExitData {
  exitCode?: number | null;
  signal?: string | null;
  note?: string;
  evidence?: Evidence;
}

/**
 * A fact: a supervisor that had lost track of this actor (it restarted, or the Docker Engine did) recovered it at
 * `version` (the stream's version it saw). The machine enters its current state again, so the effects that state
 * asks for run again: the machine, not the reconciler, knows what must be redone.
 */
export interface RecoveredData {
  version: number;
  /** Which supervisor recovered it (its node name on a cluster), when it has one. */
  node?: string;
  evidence?: Evidence;
}

/** Event type → its data. One entry per event the instance machine knows. */
export interface InstanceEventData {
  'instance.requested': { spec: InstanceSpec };
  /** A labelled container no stream knew, adopted by the reconciler (orphanPolicy 'adopt'). */
  'instance.discovered': SandboxLocation & { spec: InstanceSpec; startedAt?: string | null; evidence?: Evidence };
  'instance.spawned': SandboxLocation & { healthyAfterMs?: number };
  'instance.healthy': { identity: 'match' | 'legacy'; warning?: string };
  'instance.spawn-failed': CrashData & { port?: number };
  'instance.lifecycle-failed': CrashData & { hook?: string };
  'instance.running': { hooks?: string[]; adopted?: boolean };
  'instance.pause-requested': Record<string, never>;
  'instance.resume-requested': Record<string, never>;
  'instance.stop-requested': { graceMs?: number | null };
  'instance.kill-requested': Record<string, never>;
  'instance.exited': ExitData;
  'instance.crashed': CrashData;
  'instance.adopted': SandboxLocation & { startedAt?: string | null; evidence?: Evidence };
  'instance.lost': { evidence?: Evidence };
  /** The supervisor stopped the instance's sandbox as it stopped itself: the next start spawns it again (`instance.recovered`). */
  'instance.suspended': { reason: SuspendReason; message?: string; evidence?: Evidence };
  'instance.restart-scheduled': { attempt: number; delayMs: number; dueAt: string };
  'instance.restart-due': { attempt: number; dueAt: string };
  'instance.tool-granted': { tool: string; via?: string };
  'instance.tool-revoked': { tool: string; via?: string };
  /** A supervisor took the actor back (after its restart, a Docker restart): its state is entered again. */
  'instance.recovered': RecoveredData;
}

export type InstanceEventType = keyof InstanceEventData;
