// How long a CLI command waits for the supervisor's answer (`--timeout <ms>`). The request carries the same bound
// as its deadline (`runlog-deadline`, src/server/deadline.ts), so a supervisor that could not answer in time (stopped
// with SIGSTOP, swapped out) refuses it when it wakes instead of acting for a caller that has given up.
import { UsageError } from '../domain/errors.ts';
import type { CommandArgs, FlagSpec } from './command.ts';

/** Longest --timeout accepted: a day, as for an execution's own timeout. */
const MAX_REQUEST_TIMEOUT_MS = 24 * 3600_000;

/**
 * The flag (`--timeout`, or `--wait` where `--timeout` is already the run's own deadline) of a command that asks the
 * supervisor, with its default as help shows it.
 */
export function timeoutFlag(defaultText: string): FlagSpec {
  return {
    type: 'string',
    value: '<ms>',
    description:
      'how long to wait for the supervisor; past it the command fails with TIMEOUT and the supervisor does not act on the request',
    defaultText,
  };
}

/** The command's --timeout (or `flag`) in ms, or `defaultMs`. Throws UsageError for anything but a whole number from 1 to a day. */
export function requestTimeout(args: CommandArgs, defaultMs: number, flag: 'timeout' | 'wait' = 'timeout'): number {
  const given = args.values[flag];
  if (given === undefined) return defaultMs;
  const ms = typeof given === 'string' && /^\d{1,9}$/.test(given) ? Number(given) : NaN;
  if (!Number.isSafeInteger(ms) || ms < 1 || ms > MAX_REQUEST_TIMEOUT_MS)
    throw new UsageError(
      `--${flag} must be a whole number of milliseconds from 1 to ${MAX_REQUEST_TIMEOUT_MS}, not '${String(given)}'`,
    );
  return ms;
}
