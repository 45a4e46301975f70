// A job's sealed secrets, checked early and opened late: resolution opens them once to refuse a job whose secrets
// this runner cannot or may not open, and drops the values; the invoke step opens them again for the envelope.
//
// Why twice: the values live only in the memory of the step that hands them to the sandbox. Nothing keeps them
// between steps (no field, no cache, no event), so nothing can write them to the log, a trace or a receipt, and an
// invoke resumed after a restart opens them the same way as a first one. What may be recorded is the secrets
// record's strong ref and its entry names: names are chosen to be public (the record itself lists them in clear).
import type { AtprotoReader } from '../../adapters/atproto/index.ts';
import type { RunnerKeyRing } from '../../adapters/files/runner-keys.ts';
import { SecretsNotCallersError } from '../../domain/at-run/secrets-errors.ts';
import type { Resolved } from '../../domain/execution-events.ts';
import type { ExecutionRequest } from '../../machines/execution.machine.ts';
import { openSecretsFor } from './sealed-secrets-records.ts';

/** What a check of a job's secrets may record: the record it read and the names it opened, never a value. */
export interface SecretsChecked {
  uri: string;
  cid: string;
  names: string[];
}

export interface JobSecretsDeps {
  reader: AtprotoReader;
  /** This runner's key ring (asked for only when a job names secrets). */
  ring: () => RunnerKeyRing;
  /** This runner's DID (its publisher's); absent, no secrets are addressed to it and every open is refused. */
  runnerDid: () => string | undefined;
  nowMs: () => number;
}

export class JobSecrets {
  constructor(private readonly deps: JobSecretsDeps) {}

  /**
   * The values of the secrets the request's job names, by name, or undefined when it names none. Throws
   * SECRETS_NOT_CALLERS for a record outside the job author's repo, or the typed refusal of openEntries
   * (SECRETS_*); their messages name keys, entries and records, never a value. The caller
   * puts the result in the envelope and nowhere else.
   */
  async open(
    request: ExecutionRequest,
    r: Pick<Resolved, 'codeUri' | 'via'>,
    deadlineAt?: number,
  ): Promise<Record<string, string> | undefined> {
    const ref = request.job?.secrets;
    if (!ref) return undefined;
    // Only the job's author may hand secrets to a run: a record's strong ref is public, and another account's
    // would let anyone run the allowed code with their own input and someone else's values.
    if (ref.uri.slice('at://'.length).split('/')[0] !== request.callerDid)
      throw new SecretsNotCallersError(ref.uri, request.callerDid ?? '(none)');
    return openSecretsFor(this.deps.reader, this.deps.ring(), {
      ref,
      // No publisher, no runner DID: an empty one matches no record's runner (SECRETS_RUNNER_MISMATCH).
      runnerDid: this.deps.runnerDid() ?? '',
      codeUri: r.codeUri,
      ...(r.via ? { aliasUri: r.via } : {}),
      now: new Date(this.deps.nowMs()),
      ...(deadlineAt !== undefined ? { deadlineAt } : {}),
    });
  }
}

/** What resolution records of the secrets it checked: the record's strong ref and the names, never a value. */
export function checkedSecrets(request: ExecutionRequest, values: Record<string, string>): SecretsChecked | null {
  const ref = request.job?.secrets;
  return ref ? { uri: ref.uri, cid: ref.cid, names: Object.keys(values) } : null;
}
