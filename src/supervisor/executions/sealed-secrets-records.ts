// Sealed secrets on the network: sealing values to a runner's advertised key and writing the secrets record in the
// caller's repo (`runlog secrets seal`), and reading one back and opening it with this runner's key ring (for a job's
// execution). The crypto is src/domain/at-run/sealed-secrets.ts; the key ring is src/adapters/files/runner-keys.ts;
// this file joins them to the verified reader and the publisher, and is what the CLI reaches them through.

import { ulid } from '../../adapters/ids.ts';
import {
  AT_RUN_V2,
  createAtprotoReader,
  isValidDid,
  type AtprotoReader,
  type AtprotoReaderOptions,
  type JsonObject,
  type Publisher,
  type StrongRef,
} from '../../adapters/atproto/index.ts';
import { openRunnerKeyRing, type RunnerKeyInfo, type RunnerKeyRing } from '../../adapters/files/runner-keys.ts';
import { openEntries, sealEntries } from '../../domain/at-run/sealed-secrets.ts';
import { RunnerEncryptionKeyMissingError } from '../../domain/at-run/secrets-errors.ts';
import { isX25519DidKey } from '../../domain/at-run/x25519-keys.ts';
import { ValidationError } from '../../domain/errors.ts';

export type { RunnerKeyInfo, RunnerKeyRing };

/** The runner's key ring in `home` (<home>/runner-keys.json). */
export function runnerKeyRing(home: string): RunnerKeyRing {
  return openRunnerKeyRing(home);
}

export interface SealedSecretsRef extends StrongRef {
  /** The runner record the key was read from (its strong ref). */
  runnerRecord: StrongRef;
  /** The key the entries are sealed to. */
  recipientKey: string;
  /** The entries' names (never their values). */
  names: string[];
}

export interface SealOptions {
  /** The runner's DID: its record dev.mainasara.at-run.beta.v2.runner/self names the key. */
  runner: string;
  /** Restricts the values to executions of this code (or alias) record. */
  code?: string;
  entries: readonly { name: string; value: string }[];
  /** How the runner record is read (strict: proof and signature checked) when no reader is given. */
  atproto?: AtprotoReaderOptions;
  reader?: AtprotoReader;
}

/**
 * Reads the runner's record through the verified reader, seals every value to its `encryptionKey`, and writes the
 * secrets record in the publisher's repo under a fresh record key (bound into every entry). Returns the strong ref
 * a job names.
 */
export async function sealSecretsFor(publisher: Publisher, opts: SealOptions): Promise<SealedSecretsRef> {
  if (!isValidDid(opts.runner))
    throw new ValidationError('DID_INVALID', 'secrets are sealed to a runner named by its DID', [
      `${JSON.stringify(opts.runner.slice(0, 100))} is not a DID`,
    ]);
  const reader = opts.reader ?? createAtprotoReader(opts.atproto ?? {});
  const runnerRecord = await reader.fetchRecord(`at://${opts.runner}/${AT_RUN_V2.runner}/self`);
  const recipientKey = runnerRecord.value.encryptionKey;
  if (!isX25519DidKey(recipientKey)) throw new RunnerEncryptionKeyMissingError(runnerRecord.uri);
  const rkey = ulid().toLowerCase();
  const record = sealEntries({
    recordUri: `at://${publisher.did}/${AT_RUN_V2.secrets}/${rkey}`,
    runner: opts.runner,
    recipientKey,
    ...(opts.code !== undefined ? { code: opts.code } : {}),
    entries: opts.entries,
  });
  // why: SecretsRecord is plain JSON (strings and $bytes objects); its interface has no index signature
  const ref = await publisher.putRecord(AT_RUN_V2.secrets, rkey, record as unknown as JsonObject);
  return {
    uri: ref.uri,
    cid: ref.cid,
    runnerRecord: { uri: runnerRecord.uri, cid: runnerRecord.cid },
    recipientKey,
    names: opts.entries.map((e) => e.name),
  };
}

export interface OpenSecretsOptions {
  /** The secrets record as the job names it (strong ref: the CID must match). */
  ref: StrongRef;
  /** This runner's DID. */
  runnerDid: string;
  /** The code record the execution runs, and the alias it was named by, if any. */
  codeUri: string;
  aliasUri?: string;
  now?: Date;
  deadlineAt?: number;
}

/**
 * Reads a secrets record (verified, at the CID the job names) and opens its entries with this runner's key ring:
 * the values by name, or the typed refusal of openEntries. For a job's execution only; never log the result.
 */
export async function openSecretsFor(
  reader: AtprotoReader,
  ring: RunnerKeyRing,
  opts: OpenSecretsOptions,
): Promise<Record<string, string>> {
  const fetched = await reader.fetchRecord(opts.ref.uri, {
    expectCid: opts.ref.cid,
    ...(opts.deadlineAt !== undefined ? { deadlineAt: opts.deadlineAt } : {}),
  });
  return openEntries(fetched.value, {
    recordUri: fetched.uri,
    runnerDid: opts.runnerDid,
    codeUri: opts.codeUri,
    ...(opts.aliasUri !== undefined ? { aliasUri: opts.aliasUri } : {}),
    keyFor: (key, now) => ring.forDecryption(key, now),
    now: opts.now ?? new Date(),
  });
}
