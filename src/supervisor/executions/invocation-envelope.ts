// The invocation envelope an execution's sandbox reads on stdin, and the bound on its size. Resolution checks the
// size before anything is pulled or created, and the invoke step sends it, so both build it the same way here.
import type { InvocationEnvelope } from '../../adapters/docker/execution-sandbox.ts';
import { ENVELOPE_OVERHEAD_BYTES, type OperatorPolicy } from '../../domain/at-run/operator-policy.ts';
import { ValidationError } from '../../domain/errors.ts';
import type { Resolved } from '../../domain/execution-events.ts';
import type { ExecutionRequest } from '../../machines/execution.machine.ts';

/** The largest envelope sent on stdin: the largest input the policy admits, and room for the rest. */
export function maxEnvelopeBytes(policy: OperatorPolicy): number {
  return policy.input.maxBytes + ENVELOPE_OVERHEAD_BYTES;
}

/**
 * The envelope of one invocation. `secrets` (a job's opened secrets) becomes `context.secrets`; an execution
 * without secrets has no such key, so its envelope is what it was before secrets existed.
 */
export function envelopeOf(
  request: ExecutionRequest,
  r: Pick<Resolved, 'codeUri' | 'codeCid'>,
  deadline: string,
  secrets?: Record<string, string>,
): InvocationEnvelope {
  return {
    version: 1,
    id: request.executionId,
    type: 'invoke',
    code: { uri: r.codeUri, cid: r.codeCid },
    handler: request.handler,
    input: request.input ?? null,
    context: { callerDid: request.callerDid, deadline, ...(secrets ? { secrets } : {}) },
  };
}

/**
 * Refuses (ENVELOPE_TOO_LARGE) an envelope the sandbox would refuse: its deadline is a fixed-length timestamp, and
 * the job's secrets, when it has any, are counted as they will be sent. The message gives sizes only.
 */
export function checkEnvelope(
  policy: OperatorPolicy,
  request: ExecutionRequest,
  r: Resolved,
  secrets?: Record<string, string>,
): void {
  const size = Buffer.byteLength(JSON.stringify(envelopeOf(request, r, new Date(0).toISOString(), secrets))) + 1;
  if (size > maxEnvelopeBytes(policy)) {
    throw new ValidationError(
      'ENVELOPE_TOO_LARGE',
      `the invocation envelope would be ${size} bytes; this runner sends at most ${maxEnvelopeBytes(policy)}`,
      [`${size} > ${maxEnvelopeBytes(policy)}`],
    );
  }
}
