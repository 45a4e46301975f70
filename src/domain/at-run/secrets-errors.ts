// The typed refusals of sealed secrets (dev.mainasara.at-run.beta.v2.secrets), of sealed job results and of the
// runner's key ring. Each is its own class with its own code, so a job's refusal can name exactly why without parsing
// messages. No message or detail ever carries a secret value or a result: they name keys, entries and records.

import { RunlogError, ValidationError } from '../errors.ts';

/** A string that should be an X25519 public key as a did:key is not one. */
export class EncryptionKeyInvalidError extends ValidationError {
  constructor(issues: readonly string[]) {
    super('ENCRYPTION_KEY_INVALID', 'not an X25519 public key as a did:key', issues);
  }
}

/** A secrets record is malformed (names, duplicates, entry count, sizes, fields): nothing was decrypted. */
export class SecretsRecordInvalidError extends ValidationError {
  constructor(issues: readonly string[]) {
    super('SECRETS_RECORD_INVALID', 'invalid secrets record', issues);
  }
}

/** What a caller asked to seal is not acceptable (names, duplicates, count, value sizes): nothing was sealed. */
export class SecretsInputInvalidError extends ValidationError {
  constructor(issues: readonly string[]) {
    super('SECRETS_INPUT_INVALID', 'cannot seal these secrets', issues);
  }
}

/** The runner's record advertises no encryption key: secrets cannot be sealed to it. */
export class RunnerEncryptionKeyMissingError extends RunlogError {
  constructor(readonly runnerUri: string) {
    super(
      'RUNNER_ENCRYPTION_KEY_MISSING',
      `the runner record ${runnerUri} advertises no encryptionKey: this runner does not take sealed secrets`,
      { runnerUri },
    );
  }
}

/** The secrets are sealed to a key this runner does not hold (another runner's, or one it dropped). */
export class SecretsKeyUnknownError extends RunlogError {
  constructor(readonly recipientKey: string) {
    super('SECRETS_KEY_UNKNOWN', `the secrets are sealed to ${recipientKey}, a key this runner does not hold`, {
      recipientKey,
    });
  }
}

/** The secrets are sealed to a key of this runner that was retired before now: they must be sealed again. */
export class SecretsKeyRetiredError extends RunlogError {
  constructor(
    readonly recipientKey: string,
    readonly retiredAt: string,
  ) {
    super(
      'SECRETS_KEY_RETIRED',
      `the secrets are sealed to ${recipientKey}, a key this runner retired at ${retiredAt}; seal them again to its current key`,
      { recipientKey, retiredAt },
    );
  }
}

/** An entry failed authentication: its ciphertext, nonce or ephemeral key was changed, or it was moved. */
export class SecretsTamperedError extends RunlogError {
  constructor(readonly entry: string) {
    super(
      'SECRETS_TAMPERED',
      `secret ${JSON.stringify(entry)} failed authentication: the entry was altered, or moved from another name, record, code or runner`,
      { entry },
    );
  }
}

/** The secrets are restricted to another code record than the execution's. */
export class SecretsCodeMismatchError extends RunlogError {
  constructor(
    readonly allowed: string,
    readonly requested: string,
  ) {
    super('SECRETS_CODE_MISMATCH', `the secrets are restricted to ${allowed}, not ${requested}`, {
      allowed,
      requested,
    });
  }
}

/**
 * A job names a secrets record in another account's repo. The record is public and its strong ref easy to copy, so
 * without this anyone could run the allowed code with their own input and another account's secrets.
 */
export class SecretsNotCallersError extends RunlogError {
  constructor(
    readonly recordUri: string,
    readonly callerDid: string,
  ) {
    super(
      'SECRETS_NOT_CALLERS',
      `the secrets record ${recordUri} is not in the repo of the job's author (${callerDid}): a job may name only its author's own secrets`,
      { recordUri, callerDid },
    );
  }
}

/** The secrets are addressed to another runner. */
export class SecretsRunnerMismatchError extends RunlogError {
  constructor(
    readonly addressedTo: string,
    readonly runner: string,
  ) {
    super('SECRETS_RUNNER_MISMATCH', `the secrets are addressed to ${addressedTo}, not to this runner (${runner})`, {
      addressedTo,
      runner,
    });
  }
}

/** The key ring file can be read by other users, or is not the current user's: its keys are not used. */
export class RunnerKeysInsecureError extends RunlogError {
  constructor(
    readonly file: string,
    reason: string,
  ) {
    super(
      'RUNNER_KEYS_INSECURE',
      `refusing to use the runner key ring ${file}: ${reason}. ` +
        `Its private keys may have been read; run chmod 600 ${file} if it is yours, then rotate`,
      { file, reason },
    );
  }
}

/** The key ring file does not parse as a key ring: it is left untouched. */
export class RunnerKeysDamagedError extends RunlogError {
  constructor(
    readonly file: string,
    reason: string,
  ) {
    super('RUNNER_KEYS_DAMAGED', `the runner key ring ${file} is damaged (${reason}); it was left untouched`, {
      file,
      reason,
    });
  }
}

/** A sealed job result that this key cannot open (sealed to another key or for another job, altered, malformed). */
export class ResultUnsealableError extends RunlogError {
  constructor(reason: string, details?: Record<string, unknown>) {
    super('RESULT_UNSEALABLE', `the sealed result cannot be opened: ${reason}`, details);
  }
}
