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

export function envelopeOf(
  request: ExecutionRequest,
  r: Pick<Resolved, 'codeUri' | 'codeCid'>,
  deadline: string,
): InvocationEnvelope {
  return {
    version: 1,
    id: request.executionId,
    type: 'invoke',
    code: { uri: r.codeUri, cid: r.codeCid },
    handler: request.handler,
    input: request.input ?? null,
    context: { callerDid: request.callerDid, deadline },
  };
}

/** Refuses (ENVELOPE_TOO_LARGE) an envelope the sandbox would refuse: its deadline is a fixed-length timestamp. */
export function checkEnvelope(policy: OperatorPolicy, request: ExecutionRequest, r: Resolved): void {
  const size = Buffer.byteLength(JSON.stringify(envelopeOf(request, r, new Date(0).toISOString()))) + 1;
  if (size > maxEnvelopeBytes(policy)) {
    throw new ValidationError(
      'ENVELOPE_TOO_LARGE',
      `the invocation envelope would be ${size} bytes; this runner sends at most ${maxEnvelopeBytes(policy)}`,
      [`${size} > ${maxEnvelopeBytes(policy)}`],
    );
  }
}
