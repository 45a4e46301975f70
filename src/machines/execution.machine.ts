// One at-run execution, pure. Each step of the seed's PDS-first flow is an event carrying what was
// used (CIDs, digests, volumes, limits), so a finished execution can be inspected and replayed.
//
//   new → resolving → materializing → starting → running → succeeded
//              └───────────┴─────────────┴──────────┴────→ failed (typed reason)
//   starting | running ──execution.adopted──→ adopted ──→ succeeded | failed
import { assign, setup } from 'xstate';
import type { MachineEvent } from '../domain/events.ts';
import { noEffect } from './effects.ts';

export type FailureReason = 'resolution' | 'validation' | 'materialization' | 'runtime' | 'timeout' | 'cancelled' | 'lost';
export const FAILURE_REASONS: readonly FailureReason[] = ['resolution', 'validation', 'materialization', 'runtime', 'timeout', 'cancelled', 'lost'];

export interface ExecutionRequest {
  executionId: string;
  uri: string;
  handler: string;
  input: unknown;
  callerDid: string | null;
  /** Wall-clock budget for the invocation; the deadline is computed when the execution is requested. */
  timeoutMs: number;
}

export interface ExecutionContext {
  request: ExecutionRequest | null;
  requestedAt: string | null;
  deadline: string | null;
  /** Filled by execution.resolved: which records, CIDs and image were chosen, and the effective limits. */
  resolved: Record<string, unknown> | null;
  /** Filled by execution.materialized: volumes and digests. */
  materialized: Record<string, unknown> | null;
  containerId: string | null;
  startedAt: string | null;
  steps: { name: string; at: string; detail: Record<string, unknown> }[];
  outcome: { status: 'succeeded' | 'failed'; at: string } | null;
  result: { output: unknown; outputHash: string | null } | null;
  failure: { reason: FailureReason; code: string; message: string } | null;
  stderrTail: string | null;
  adopted: boolean;
}

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

type E = MachineEvent;
const d = (e: E) => e.data as Record<string, any>;

function reasonOf(x: unknown): FailureReason {
  return FAILURE_REASONS.includes(x as FailureReason) ? (x as FailureReason) : 'runtime';
}

export const executionMachine = setup({
  types: {} as { context: ExecutionContext; events: E },
  actions: {
    resolve: noEffect,
    materialize: noEffect,
    createSandbox: noEffect,
    invoke: noEffect,
    collect: noEffect,
    killSandbox: noEffect,
    cleanup: noEffect,
    announce: noEffect,
    recordStep: assign({
      steps: ({ context, event }) => [...context.steps, { name: String(d(event).name ?? event.type), at: event.at, detail: (d(event).detail ?? {}) as Record<string, unknown> }],
    }),
    recordSuccess: assign(({ event }) => ({
      result: { output: d(event).output, outputHash: (d(event).outputHash as string) ?? null },
      stderrTail: typeof d(event).stderrTail === 'string' ? d(event).stderrTail : null,
      outcome: { status: 'succeeded' as const, at: event.at },
    })),
    recordCancelled: assign({ failure: { reason: 'cancelled' as const, code: 'CANCELLED', message: 'cancelled before it ran' } }),
    recordFailure: assign(({ event }) => ({
      failure: { reason: reasonOf(d(event).reason), code: String(d(event).code ?? 'FAILED'), message: String(d(event).message ?? '') },
      stderrTail: typeof d(event).stderrTail === 'string' ? d(event).stderrTail : null,
      outcome: { status: 'failed' as const, at: event.at },
    })),
  },
}).createMachine({
  id: 'execution',
  context: initialContext,
  initial: 'new',
  states: {
    new: {
      on: {
        'execution.requested': {
          target: 'resolving',
          actions: assign({
            request: ({ event }) => d(event).request as ExecutionRequest,
            requestedAt: ({ event }) => event.at,
            deadline: ({ event }) => (d(event).deadline as string) ?? null,
          }),
        },
      },
    },
    resolving: {
      entry: [{ type: 'resolve', params: ({ context }) => ({ request: context.request }) }],
      on: {
        'execution.step': { actions: 'recordStep' },
        'execution.resolved': { target: 'materializing', actions: assign({ resolved: ({ event }) => d(event) }) },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
        'execution.cancel-requested': { target: 'failed', actions: 'recordCancelled' },
      },
    },
    materializing: {
      entry: [{ type: 'materialize', params: ({ context }) => ({ request: context.request, resolved: context.resolved }) }],
      on: {
        'execution.step': { actions: 'recordStep' },
        'execution.materialized': { target: 'starting', actions: assign({ materialized: ({ event }) => d(event) }) },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
        'execution.cancel-requested': { target: 'failed', actions: 'recordCancelled' },
      },
    },
    starting: {
      entry: [
        { type: 'createSandbox', params: ({ context }) => ({ request: context.request, resolved: context.resolved, materialized: context.materialized }) },
      ],
      on: {
        'execution.step': { actions: 'recordStep' },
        'execution.started': {
          target: 'running',
          actions: [
            assign({ containerId: ({ event }) => String(d(event).containerId), startedAt: ({ event }) => event.at }),
            { type: 'invoke', params: ({ context }) => ({ request: context.request, containerId: context.containerId, deadline: context.deadline, resolved: context.resolved }) },
          ],
        },
        'execution.adopted': { target: 'adopted' },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
        'execution.cancel-requested': { target: 'failed', actions: 'recordCancelled' },
      },
    },
    running: {
      on: {
        'execution.step': { actions: 'recordStep' },
        'execution.succeeded': { target: 'succeeded', actions: 'recordSuccess' },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
        'execution.cancel-requested': {
          actions: { type: 'killSandbox', params: ({ context }) => ({ containerId: context.containerId, reason: 'cancelled' }) },
        },
        'execution.adopted': { target: 'adopted' },
      },
    },
    adopted: {
      entry: [
        assign({ adopted: true, containerId: ({ context, event }) => (d(event).containerId as string) ?? context.containerId }),
        { type: 'collect', params: ({ context }) => ({ request: context.request, containerId: context.containerId, deadline: context.deadline }) },
      ],
      on: {
        'execution.step': { actions: 'recordStep' },
        'execution.succeeded': { target: 'succeeded', actions: 'recordSuccess' },
        'execution.failed': { target: 'failed', actions: 'recordFailure' },
      },
    },
    succeeded: {
      type: 'final',
      entry: [
        { type: 'cleanup', params: ({ context }) => ({ executionId: context.request?.executionId, containerId: context.containerId, materialized: context.materialized }) },
        { type: 'announce', params: ({ context }) => ({ topic: 'execution:finished', executionId: context.request?.executionId, status: 'succeeded' }) },
      ],
    },
    failed: {
      type: 'final',
      entry: [
        assign({ outcome: ({ context, event }) => context.outcome ?? { status: 'failed' as const, at: event.at } }),
        { type: 'cleanup', params: ({ context }) => ({ executionId: context.request?.executionId, containerId: context.containerId, materialized: context.materialized }) },
        {
          type: 'announce',
          params: ({ context }) => ({ topic: 'execution:finished', executionId: context.request?.executionId, status: 'failed', failure: context.failure }),
        },
      ],
    },
  },
});

export type ExecutionMachine = typeof executionMachine;
