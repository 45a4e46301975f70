// One at-run execution, pure. Each step of the seed's PDS-first flow is an event carrying what was
// used (CIDs, digests, volumes, limits), so a finished execution can be inspected and replayed.
//
//   new → resolving → materializing → starting → running → succeeded
//   resolving | materializing | starting | running ──→ failed (typed reason)
//   new ──execution.requested (refused)──→ refusing ──→ failed (a job refused at intake: answered, never run)
//   starting | running ──execution.adopted──→ adopted ──→ succeeded | failed
//   resolving … adopted ──execution.recovered──→ the same state, entered again (its step's effect runs again)
import { assign, setup } from 'xstate';
import type { ExecutionEvent } from '../domain/events.ts';
import {
  FAILURE_REASONS,
  type ExecutionEventData,
  type ExecutionRequest,
  type FailureReason,
  type LatencyProfile,
  type Materialized,
  type Refusal,
  type Resolved,
} from '../domain/execution-events.ts';
import { effectActions } from './effects.ts';

// The vocabulary lives in the domain (execution-events.ts); re-exported here for the code that reads it with the machine.
export { FAILURE_REASONS, type ExecutionRequest, type FailureReason };

// A type alias, not an interface: it is a plain record (what a view of the actor holds), so a view's
// context reads as this type without a double cast.
export type ExecutionContext = {
  request: ExecutionRequest | null;
  requestedAt: string | null;
  deadline: string | null;
  /** Filled by execution.resolved: which records, CIDs and image were chosen, and the effective limits. */
  resolved: Resolved | null;
  /** Filled by execution.materialized: volumes and digests. */
  materialized: Materialized | null;
  containerId: string | null;
  startedAt: string | null;
  steps: { name: string; at: string; detail: Record<string, unknown> }[];
  outcome: { status: 'succeeded' | 'failed'; at: string } | null;
  result: { output: unknown; outputHash: string | null } | null;
  failure: { reason: FailureReason; code: string; message: string } | null;
  stderrTail: string | null;
  adopted: boolean;
  /** Why a job was refused at intake (absent: it was not, and from logs written before jobs existed). */
  refused?: Refusal;
  /** Step durations (ms) from the outcome event; absent from logs written before profiles were recorded. */
  profile?: LatencyProfile | null;
};

const initialContext: ExecutionContext = {
  request: null,
  requestedAt: null,
  deadline: null,
  resolved: null,
  materialized: null,
  containerId: null,
  startedAt: null,
  steps: [],
  outcome: null,
  result: null,
  failure: null,
  stderrTail: null,
  adopted: false,
};

type E = ExecutionEvent;

/** The execution machine's effects: name → params. The handlers in src/supervisor are typed by this map. */
export interface ExecutionEffects {
  resolve: { request: ExecutionRequest };
  /** Answers a job refused at intake (its receipt says why), then records it failed. */
  refuse: { request: ExecutionRequest; refused: Refusal };
  materialize: { request: ExecutionRequest; resolved: Resolved };
  createSandbox: { request: ExecutionRequest; resolved: Resolved; materialized: Materialized };
  /** `resumed`: run again on recovery, on a container a dead supervisor may have attached to (see executions.ts). */
  invoke: {
    request: ExecutionRequest;
    containerId: string;
    deadline: string | null;
    resolved: Resolved;
    resumed?: boolean;
  };
  collect: { request: ExecutionRequest; containerId: string | null; deadline: string | null };
  killSandbox: { containerId: string | null; reason: 'cancelled' };
  cleanup: { executionId: string | undefined; containerId: string | null; materialized: Materialized | null };
  announce: {
    topic: 'execution:finished';
    executionId: string;
    status: 'succeeded' | 'failed';
    failure?: ExecutionContext['failure'];
  };
}

/*
 * What earlier events recorded, for the states after them: the request is set by execution.requested (the only
 * way out of `new`), resolved by execution.resolved (the only way into materializing), materialized by
 * execution.materialized (the only way into starting). A null here would be a machine bug, not a runtime condition.
 */
const requestOf = (c: ExecutionContext): ExecutionRequest => c.request as ExecutionRequest;
const resolvedOf = (c: ExecutionContext): Resolved => c.resolved as Resolved;
const materializedOf = (c: ExecutionContext): Materialized => c.materialized as Materialized;
/** Set by execution.requested whenever it leads to `refusing` (the guard reads the same field). */
const refusalOf = (c: ExecutionContext): Refusal => c.refused as Refusal;

/** The data of an event of this type, or nothing (named actions see every event type). */
function dataOf<T extends keyof ExecutionEventData>(event: E, type: T): Partial<ExecutionEventData[T]> {
  // The check on `type` is what the compiler cannot follow through a generic: the data is that type's.
  return event.type === type ? (event.data as ExecutionEventData[T]) : {};
}

/** The outcome's latency profile when it is one (an object); anything else, or none (older logs), is null. */
function profileOf(p: unknown): LatencyProfile | null {
  return p && typeof p === 'object' && !Array.isArray(p) ? (p as LatencyProfile) : null;
}

function reasonOf(x: unknown): FailureReason {
  return FAILURE_REASONS.includes(x as FailureReason) ? (x as FailureReason) : 'runtime';
}

/**
 * The at-run execution machine (XState), pure: a transition returns the next state and the effects to run as data.
 * {@link replay} and {@link replaySteps} fold an execution's events with it offline. Its type is inferred by XState
 * from this definition; the states and the events each takes are drawn in docs/reference/machines.md.
 */
export const executionMachine = setup({
  types: {} as { context: ExecutionContext; events: E },
  guards: {
    /** A job refused at intake: answered, never resolved. */
    refused: ({ event }) => Boolean(dataOf(event, 'execution.requested').refused),
  },
  actions: {
    ...effectActions<ExecutionEffects>({
      resolve: true,
      refuse: true,
      materialize: true,
      createSandbox: true,
      invoke: true,
      collect: true,
      killSandbox: true,
      cleanup: true,
      announce: true,
    }),
    recordRequest: assign(({ event }) => {
      const x = dataOf(event, 'execution.requested');
      return {
        request: x.request ?? null,
        requestedAt: event.at,
        deadline: x.deadline ?? null,
        ...(x.refused ? { refused: x.refused } : {}),
      };
    }),
    recordStep: assign({
      steps: ({ context, event }) => {
        const x = dataOf(event, 'execution.step');
        return [...context.steps, { name: String(x.name ?? event.type), at: event.at, detail: x.detail ?? {} }];
      },
    }),
    recordSuccess: assign(({ event }) => {
      const x = dataOf(event, 'execution.succeeded');
      return {
        profile: profileOf(x.profile),
        result: { output: x.output, outputHash: x.outputHash ?? null },
        stderrTail: typeof x.stderrTail === 'string' ? x.stderrTail : null,
        outcome: { status: 'succeeded' as const, at: event.at },
      };
    }),
    recordCancelled: assign({
      failure: { reason: 'cancelled' as const, code: 'CANCELLED', message: 'cancelled before it ran' },
    }),
    recordFailure: assign(({ event }) => {
      const x = dataOf(event, 'execution.failed');
      return {
        profile: profileOf(x.profile),
        failure: { reason: reasonOf(x.reason), code: String(x.code ?? 'FAILED'), message: String(x.message ?? '') },
        stderrTail: typeof x.stderrTail === 'string' ? x.stderrTail : null,
        outcome: { status: 'failed' as const, at: event.at },
      };
    }),
  },
}).createMachine({
  id: 'execution',
  context: initialContext,
  initial: 'new',
  states: {
    new: {
      on: {
        'execution.requested': [
          { guard: 'refused', target: 'refusing', actions: 'recordRequest' },
          { target: 'resolving', actions: 'recordRequest' },
        ],
      },
    },
    refusing: {
      entry: [
        {
          type: 'refuse',
          params: ({ context }) => ({ request: requestOf(context), refused: refusalOf(context) }),
        },
      ],
      on: {
        // The answer died with the supervisor: written again (the receipt's key is the execution id).
        'execution.recovered': { target: 'refusing', reenter: true },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
      },
    },
    resolving: {
      entry: [{ type: 'resolve', params: ({ context }) => ({ request: requestOf(context) }) }],
      on: {
        'execution.step': { actions: 'recordStep' },
        'execution.recovered': { target: 'resolving', reenter: true },
        'execution.resolved': { target: 'materializing', actions: assign({ resolved: ({ event }) => event.data }) },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
        'execution.cancel-requested': { target: 'failed', actions: 'recordCancelled' },
      },
    },
    materializing: {
      entry: [
        {
          type: 'materialize',
          params: ({ context }) => ({ request: requestOf(context), resolved: resolvedOf(context) }),
        },
      ],
      on: {
        'execution.step': { actions: 'recordStep' },
        'execution.recovered': { target: 'materializing', reenter: true },
        'execution.materialized': { target: 'starting', actions: assign({ materialized: ({ event }) => event.data }) },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
        'execution.cancel-requested': { target: 'failed', actions: 'recordCancelled' },
      },
    },
    starting: {
      entry: [
        {
          type: 'createSandbox',
          params: ({ context }) => ({
            request: requestOf(context),
            resolved: resolvedOf(context),
            materialized: materializedOf(context),
          }),
        },
      ],
      on: {
        'execution.step': { actions: 'recordStep' },
        'execution.recovered': { target: 'starting', reenter: true },
        'execution.started': {
          target: 'running',
          actions: assign({
            containerId: ({ event }) => String(event.data.containerId),
            startedAt: ({ event }) => event.at,
          }),
        },
        'execution.adopted': { target: 'adopted' },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
        'execution.cancel-requested': { target: 'failed', actions: 'recordCancelled' },
      },
    },
    running: {
      // Entered again on recovery only when the container was created but never started (the reconciler decides
      // that): nothing of the handler ran, so the invocation happens now.
      entry: [
        {
          type: 'invoke',
          params: ({ context, event }) => ({
            request: requestOf(context),
            containerId: String(context.containerId),
            deadline: context.deadline,
            resolved: resolvedOf(context),
            ...(event.type === 'execution.recovered' ? { resumed: true } : {}),
          }),
        },
      ],
      on: {
        'execution.step': { actions: 'recordStep' },
        'execution.recovered': { target: 'running', reenter: true },
        'execution.succeeded': { target: 'succeeded', actions: 'recordSuccess' },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
        'execution.cancel-requested': {
          actions: {
            type: 'killSandbox',
            params: ({ context }) => ({ containerId: context.containerId, reason: 'cancelled' as const }),
          },
        },
        'execution.adopted': { target: 'adopted' },
      },
    },
    adopted: {
      entry: [
        assign({
          adopted: true,
          containerId: ({ context, event }) => dataOf(event, 'execution.adopted').containerId ?? context.containerId,
        }),
        {
          type: 'collect',
          params: ({ context }) => ({
            request: requestOf(context),
            containerId: context.containerId,
            deadline: context.deadline,
          }),
        },
      ],
      on: {
        'execution.step': { actions: 'recordStep' },
        // Adopted but not finished when the supervisor went away: collect again.
        'execution.recovered': { target: 'adopted', reenter: true },
        'execution.succeeded': { target: 'succeeded', actions: 'recordSuccess' },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
      },
    },
    succeeded: {
      type: 'final',
      entry: [
        {
          type: 'cleanup',
          params: ({ context }) => ({
            executionId: context.request?.executionId,
            containerId: context.containerId,
            materialized: context.materialized,
          }),
        },
        {
          type: 'announce',
          params: ({ context }) => ({
            topic: 'execution:finished' as const,
            executionId: requestOf(context).executionId,
            status: 'succeeded' as const,
          }),
        },
      ],
    },
    failed: {
      type: 'final',
      entry: [
        assign({ outcome: ({ context, event }) => context.outcome ?? { status: 'failed' as const, at: event.at } }),
        {
          type: 'cleanup',
          params: ({ context }) => ({
            executionId: context.request?.executionId,
            containerId: context.containerId,
            materialized: context.materialized,
          }),
        },
        {
          type: 'announce',
          params: ({ context }) => ({
            topic: 'execution:finished' as const,
            executionId: requestOf(context).executionId,
            status: 'failed' as const,
            failure: context.failure,
          }),
        },
      ],
    },
  },
});

export type ExecutionMachine = typeof executionMachine;
