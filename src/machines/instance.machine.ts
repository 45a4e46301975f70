// The app-instance lifecycle, pure. Every transition is driven by an event from the log; effects are
// named actions whose params are data. Nothing here reads the clock: time arrives as `event.at`.
//
//   new → spawning → healthy → running ⇄ paused → stopping → stopped
//   spawning | healthy | running ──→ crashed ──(restart policy: backoff timer events)──→ spawning
//   any live state ──instance.adopted──→ adopted ──instance.running──→ running (paused, if it was paused)
//   any live state ──instance.lost──→ lost
//   any live state ──instance.suspended──→ suspended ──instance.recovered──→ spawning (no crash counted)
//   adopted | stopping | crashed.backoff ──instance.recovered──→ the same state, entered again (recovery)
import { assign, setup } from 'xstate';
import type { InstanceEvent } from '../domain/events.ts';
import {
  DEFAULT_RESTART,
  type CrashData,
  type CrashReason,
  type InstanceSpec,
  type RestartPolicy,
  type SandboxLocation,
} from '../domain/instance-events.ts';
import { addMs, msBetween } from '../domain/time.ts';
import { effectActions } from './effects.ts';

// The vocabulary lives in the domain (instance-events.ts); re-exported here for the code that reads it with the machine.
export { DEFAULT_RESTART, type CrashReason, type InstanceSpec, type RestartPolicy };
export type { SandboxKind } from '../domain/instance-events.ts';

/** Reasons a restart cannot fix: the instance stays down. */
const PERMANENT: readonly CrashReason[] = ['identity-mismatch', 'spawn-error'];

// A type alias, not an interface: it is a plain record (what a view of the actor holds), so a view's
// context reads as this type without a double cast.
export type InstanceContext = {
  spec: InstanceSpec | null;
  createdAt: string | null;
  /** When the current run reached running (for the backoff reset). */
  runningSince: string | null;
  pid: number | null;
  containerId: string | null;
  host: string | null;
  port: number | null;
  identity: 'match' | 'legacy' | null;
  warnings: string[];
  /** Consecutive restarts since the last long-enough run. */
  restarts: number;
  /** The delay the next restart will wait, computed when the crash is recorded. */
  nextRestartDelayMs: number | null;
  nextRestartAt: string | null;
  lastCrash: {
    reason: CrashReason;
    message: string;
    exitCode: number | null;
    signal: string | null;
    at: string;
  } | null;
  lastExit: { exitCode: number | null; signal: string | null; at: string } | null;
  adopted: boolean;
  /** The app was paused (onPause) and not resumed: an adoption brings it back paused, not running. */
  paused: boolean;
  lostAt: string | null;
};

const initialContext: InstanceContext = {
  spec: null,
  createdAt: null,
  runningSince: null,
  pid: null,
  containerId: null,
  host: null,
  port: null,
  identity: null,
  warnings: [],
  restarts: 0,
  nextRestartDelayMs: null,
  nextRestartAt: null,
  lastCrash: null,
  lastExit: null,
  adopted: false,
  paused: false,
  lostAt: null,
};

type E = InstanceEvent;

/** The lifecycle hooks the machine asks for (the app SDK answers them). */
export type LifecycleHook = 'onCreate' | 'onStart' | 'onPause' | 'onResume' | 'onStop';

/** The instance machine's effects: name → params. The handlers in src/supervisor are typed by this map. */
export interface InstanceEffects {
  spawn: { spec: InstanceSpec; attempt: number };
  callLifecycle: { instanceId: string; hooks: LifecycleHook[]; optional?: boolean };
  stopSandbox: { instanceId: string; hooks: LifecycleHook[] };
  /** The actor names which instance: no params. */
  forceKill: Record<string, never>;
  scheduleRestart: { instanceId: string; attempt: number; delayMs: number | null };
  cancelRestart: { instanceId: string };
  reattach: { spec: InstanceSpec; containerId: string | null; host: string | null; port: number | null };
  /** Arms the restart timer for a persisted due time (after instance.restart-scheduled, or on recovery). */
  armRestart: { instanceId: string; attempt: number; dueAt: string };
  releasePort: { instanceId: string; port: number | null };
  /** Granted and revoked in any state, `new` included (no spec yet: the handler falls back to the actor's own). */
  provisionTools: { instanceId: string | undefined; tools: string[] | undefined };
  announce: { topic: 'app:crashed'; instanceId: string; appId: string; crash: InstanceContext['lastCrash'] };
}

/**
 * The spec is set by instance.requested or instance.discovered, the only ways out of `new`: every state that
 * emits an effect has one. (A null here would be a machine bug, not a runtime condition.)
 */
const specOf = (c: InstanceContext): InstanceSpec => c.spec as InstanceSpec;

/** What a crash-like event says about the crash (shared actions see every event type). */
function crashData(event: E): CrashData {
  return event.type === 'instance.crashed' ||
    event.type === 'instance.spawn-failed' ||
    event.type === 'instance.lifecycle-failed'
    ? event.data
    : {};
}

/** Where the sandbox is, from the event that says so (shared entry actions see every event type). */
function locationOf(event: E): SandboxLocation {
  return event.type === 'instance.spawned' || event.type === 'instance.adopted' || event.type === 'instance.discovered'
    ? event.data
    : {};
}

export function restartDelay(policy: RestartPolicy, attempt: number): number {
  return Math.min(policy.backoffMs * 2 ** Math.max(0, attempt - 1), policy.maxBackoffMs);
}

/** The consecutive-restart count after a crash at `at`, honouring the reset window. */
function restartsAfterCrash(ctx: InstanceContext, at: string): number {
  const policy = ctx.spec?.restart ?? DEFAULT_RESTART;
  if (ctx.runningSince && msBetween(ctx.runningSince, at) >= policy.resetAfterMs) return 0;
  return ctx.restarts;
}

/** What the restart policy makes of a crash event in this context: whether a restart follows, and after how many. */
function crashPlan(
  context: InstanceContext,
  event: E,
): { reason: CrashReason; restarts: number; willRestart: boolean } {
  const reason = crashData(event).reason ?? 'exit';
  const restarts = restartsAfterCrash(context, event.at);
  const policy = context.spec?.restart ?? DEFAULT_RESTART;
  return {
    reason,
    restarts,
    willRestart: policy.policy === 'on-failure' && !PERMANENT.includes(reason) && restarts < policy.maxRestarts,
  };
}

function crashUpdate(context: InstanceContext, event: E): Partial<InstanceContext> {
  const x = crashData(event);
  const { reason, restarts, willRestart } = crashPlan(context, event);
  const policy = context.spec?.restart ?? DEFAULT_RESTART;
  return {
    lastCrash: {
      reason,
      message: String(x.message ?? reason),
      exitCode: typeof x.exitCode === 'number' ? x.exitCode : null,
      signal: typeof x.signal === 'string' ? x.signal : null,
      at: event.at,
    },
    restarts,
    nextRestartDelayMs: willRestart ? restartDelay(policy, restarts + 1) : null,
    nextRestartAt: null,
    runningSince: null,
    pid: null,
    // The next incarnation is a fresh process: it was never paused.
    paused: false,
  };
}

/** forceKill names no params (the actor says which instance); written out so the effect map types it. */
const forceKill = { type: 'forceKill', params: {} } as const;

/**
 * A crash goes straight to crashed.backoff or crashed.down: the guard asks the restart policy (crashPlan) on
 * the context before recordCrash, the same question recordCrash answers when it plans the delay. Deciding
 * it here rather than in an eventless step inside `crashed` spares every crash a second microstep, which
 * replaying a long log pays for crash after crash.
 */
const toCrashed = (actions: 'recordCrash' | readonly ['recordCrash', typeof forceKill]) =>
  [
    { guard: 'restartPlanned', target: 'crashed.backoff', actions },
    { target: 'crashed.down', actions },
  ] as const;

/** What every live state (spawning … adopted) does with a crash, a stop, a kill, an adoption, a loss, a suspension. */
const whileLive = {
  'instance.crashed': toCrashed('recordCrash'),
  'instance.stop-requested': { target: 'stopping' },
  'instance.kill-requested': { target: 'stopping', actions: forceKill },
  'instance.adopted': { target: 'adopted' },
  'instance.lost': { target: 'lost' },
  'instance.suspended': { target: 'suspended' },
} as const;

/**
 * The app-instance machine (XState), pure: a transition returns the next state and the effects to run as data.
 * {@link replay} and {@link replaySteps} fold an instance's events with it offline. Its type is inferred by XState
 * from this definition; the states and the events each takes are drawn in docs/reference/machines.md.
 */
export const instanceMachine = setup({
  types: {} as { context: InstanceContext; events: E },
  actions: {
    ...effectActions<InstanceEffects>({
      spawn: true,
      callLifecycle: true,
      stopSandbox: true,
      forceKill: true,
      scheduleRestart: true,
      cancelRestart: true,
      reattach: true,
      armRestart: true,
      releasePort: true,
      provisionTools: true,
      announce: true,
    }),
    recordCrash: assign(({ context, event }) => crashUpdate(context, event)),
  },
  guards: {
    restartPlanned: ({ context, event }) => crashPlan(context, event).willRestart,
  },
}).createMachine({
  id: 'instance',
  context: initialContext,
  initial: 'new',
  on: {
    'instance.tool-granted': {
      actions: [
        assign({
          spec: ({ context, event }) =>
            context.spec && { ...context.spec, tools: [...new Set([...context.spec.tools, String(event.data.tool)])] },
        }),
        {
          type: 'provisionTools',
          params: ({ context }) => ({ instanceId: context.spec?.instanceId, tools: context.spec?.tools }),
        },
      ],
    },
    'instance.tool-revoked': {
      actions: [
        assign({
          spec: ({ context, event }) =>
            context.spec && { ...context.spec, tools: context.spec.tools.filter((t) => t !== event.data.tool) },
        }),
        {
          type: 'provisionTools',
          params: ({ context }) => ({ instanceId: context.spec?.instanceId, tools: context.spec?.tools }),
        },
      ],
    },
  },
  states: {
    new: {
      on: {
        'instance.requested': {
          target: 'spawning',
          actions: assign({ spec: ({ event }) => event.data.spec, createdAt: ({ event }) => event.at }),
        },
        // A labelled container no stream knew, adopted by the reconciler (orphanPolicy 'adopt').
        'instance.discovered': {
          target: 'adopted',
          actions: assign({ spec: ({ event }) => event.data.spec, createdAt: ({ event }) => event.at }),
        },
      },
    },
    spawning: {
      entry: [{ type: 'spawn', params: ({ context }) => ({ spec: specOf(context), attempt: context.restarts }) }],
      on: {
        // The child is up; the spawn effect goes on to verify its identity (the seed's waitHealthy).
        'instance.spawned': {
          actions: assign({
            pid: ({ event }) => event.data.pid ?? null,
            containerId: ({ event }) => event.data.containerId ?? null,
            host: ({ event }) => event.data.host ?? null,
            port: ({ event }) => event.data.port ?? null,
          }),
        },
        'instance.healthy': {
          target: 'healthy',
          actions: assign({
            identity: ({ event }) => event.data.identity,
            warnings: ({ context, event }) =>
              event.data.warning ? [...context.warnings, String(event.data.warning)] : context.warnings,
          }),
        },
        'instance.spawn-failed': toCrashed(['recordCrash', forceKill]),
        ...whileLive,
      },
    },
    healthy: {
      entry: [
        {
          type: 'callLifecycle',
          params: ({ context }) => ({ instanceId: specOf(context).instanceId, hooks: ['onCreate', 'onStart'] }),
        },
      ],
      on: {
        'instance.running': { target: 'running', actions: assign({ runningSince: ({ event }) => event.at }) },
        'instance.lifecycle-failed': toCrashed(['recordCrash', forceKill]),
        ...whileLive,
      },
    },
    running: {
      on: {
        'instance.pause-requested': {
          target: 'paused',
          actions: [
            assign({ paused: true }),
            {
              type: 'callLifecycle',
              params: ({ context }) => ({ instanceId: specOf(context).instanceId, hooks: ['onPause'], optional: true }),
            },
          ],
        },
        ...whileLive,
      },
    },
    paused: {
      on: {
        'instance.resume-requested': {
          target: 'running',
          actions: [
            assign({ paused: false }),
            {
              type: 'callLifecycle',
              params: ({ context }) => ({
                instanceId: specOf(context).instanceId,
                hooks: ['onResume'],
                optional: true,
              }),
            },
          ],
        },
        ...whileLive,
      },
    },
    adopted: {
      entry: [
        // Entered again on recovery: where the sandbox is stays what the adoption recorded.
        assign(({ context, event }) =>
          event.type === 'instance.recovered'
            ? context
            : {
                adopted: true,
                pid: locationOf(event).pid ?? null,
                containerId: locationOf(event).containerId ?? null,
                host: locationOf(event).host ?? null,
                port: locationOf(event).port ?? null,
              },
        ),
        {
          type: 'reattach',
          params: ({ context }) => ({
            spec: specOf(context),
            containerId: context.containerId,
            host: context.host,
            port: context.port,
          }),
        },
      ],
      on: {
        // Re-attached: the app is as it was when the supervisor went away. A paused app stays paused (no hook runs).
        'instance.running': [
          { guard: ({ context }) => context.paused, target: 'paused' },
          { target: 'running', actions: assign({ runningSince: ({ event }) => event.at }) },
        ],
        // Adopted but not re-attached when the supervisor went away: attach again.
        'instance.recovered': { target: 'adopted', reenter: true },
        ...whileLive,
      },
    },
    stopping: {
      entry: [
        {
          type: 'stopSandbox',
          params: ({ context }) => ({ instanceId: specOf(context).instanceId, hooks: ['onStop'] }),
        },
      ],
      on: {
        'instance.exited': {
          target: 'stopped',
          actions: assign({
            lastExit: ({ event }) => ({
              exitCode: event.data.exitCode ?? null,
              signal: event.data.signal ?? null,
              at: event.at,
            }),
          }),
        },
        // An exit we did not ask for while stopping is still the end we wanted.
        'instance.crashed': {
          target: 'stopped',
          actions: assign({
            lastExit: ({ event }) => ({
              exitCode: event.data.exitCode ?? null,
              signal: event.data.signal ?? null,
              at: event.at,
            }),
          }),
        },
        'instance.kill-requested': { actions: forceKill },
        'instance.lost': { target: 'lost' },
        // Its container still runs: the stop is done again (watched again by the reconciler first).
        'instance.recovered': { target: 'stopping', reenter: true },
      },
    },
    // Its supervisor stopped gracefully and stopped the sandbox with it (a PRoot child dies with its supervisor).
    // Not a crash: the restart count stays as it was, and the next start spawns it again (the reconciler records
    // instance.recovered). A supervisor killed outright records nothing: its next start counts a crash.
    suspended: {
      entry: [
        {
          type: 'releasePort',
          params: ({ context }) => ({ instanceId: specOf(context).instanceId, port: context.port }),
        },
        // The next incarnation is a fresh process (never paused); it is not running until it says so.
        assign({ pid: null, port: null, runningSince: null, paused: false }),
      ],
      on: {
        'instance.recovered': { target: 'spawning' },
        // Its container found running (a sandbox that outlived its supervisor): adopted as it is.
        'instance.adopted': { target: 'adopted' },
        'instance.stop-requested': { target: 'stopped' },
        'instance.kill-requested': { target: 'stopped' },
        'instance.lost': { target: 'lost' },
      },
    },
    stopped: {
      type: 'final',
      entry: [
        {
          type: 'releasePort',
          params: ({ context }) => ({ instanceId: specOf(context).instanceId, port: context.port }),
        },
      ],
    },
    crashed: {
      entry: [
        {
          type: 'releasePort',
          params: ({ context }) => ({ instanceId: specOf(context).instanceId, port: context.port }),
        },
        {
          type: 'announce',
          params: ({ context }) => ({
            topic: 'app:crashed' as const,
            instanceId: specOf(context).instanceId,
            appId: specOf(context).appId,
            crash: context.lastCrash,
          }),
        },
      ],
      // Every transition into `crashed` names its child (toCrashed); XState still wants a default one.
      initial: 'down',
      states: {
        backoff: {
          entry: [
            {
              type: 'scheduleRestart',
              params: ({ context }) => ({
                instanceId: specOf(context).instanceId,
                attempt: context.restarts + 1,
                delayMs: context.nextRestartDelayMs,
              }),
            },
          ],
          on: {
            'instance.restart-scheduled': {
              actions: [
                assign({ nextRestartAt: ({ event }) => String(event.data.dueAt) }),
                {
                  type: 'armRestart',
                  params: ({ context, event }) => ({
                    instanceId: specOf(context).instanceId,
                    attempt: event.data.attempt,
                    dueAt: String(event.data.dueAt),
                  }),
                },
              ],
            },
            // The supervisor restarted: a persisted timer is armed again at its due time (an overdue one fires
            // now); one never persisted is planned again, by entering the backoff again.
            'instance.recovered': [
              {
                guard: ({ context }) => context.nextRestartAt !== null,
                actions: {
                  type: 'armRestart',
                  params: ({ context }) => ({
                    instanceId: specOf(context).instanceId,
                    attempt: context.restarts + 1,
                    dueAt: String(context.nextRestartAt),
                  }),
                },
              },
              { target: 'backoff', reenter: true },
            ],
            'instance.restart-due': {
              target: '#instance.spawning',
              actions: assign({
                restarts: ({ context }) => context.restarts + 1,
                nextRestartAt: null,
                nextRestartDelayMs: null,
              }),
            },
            'instance.stop-requested': {
              target: '#instance.stopped',
              actions: { type: 'cancelRestart', params: ({ context }) => ({ instanceId: specOf(context).instanceId }) },
            },
          },
        },
        down: { type: 'final' },
      },
    },
    lost: {
      type: 'final',
      entry: [
        assign({ lostAt: ({ event }) => event.at }),
        {
          type: 'releasePort',
          params: ({ context }) => ({ instanceId: specOf(context).instanceId, port: context.port }),
        },
      ],
    },
  },
});

export type InstanceMachine = typeof instanceMachine;

/** Given a crash at `at` with a planned delay, when the restart comes due. */
export const restartDueAt = (at: string, delayMs: number): string => addMs(at, delayMs);
