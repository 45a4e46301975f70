// `--ports <min>-<max>` (else $RUNLOG_PORTS): the TCP ports a supervisor hands to PRoot instances.
//
// Two supervisors on one host (two homes, or cluster nodes placed together) each keep their own table of the
// ports they gave out. Both skip a port something already listens on, but an instance takes a moment to bind, so
// two tables drawing from one range can pick the same free port at once. Giving each supervisor its own range
// rules that out.
import { UsageError } from '../domain/errors.ts';

export interface PortRange {
  min: number;
  max: number;
}

export const DEFAULT_PORT_RANGE: PortRange = { min: 4100, max: 4999 };

/** Parses `4100-4999` (both ends included, 1024–65535, min ≤ max); anything else is a UsageError naming `source`. */
export function parsePortRange(text: string, source = '--ports'): PortRange {
  const m = /^(\d{1,5})-(\d{1,5})$/.exec(text.trim());
  const min = m ? Number(m[1]) : NaN;
  const max = m ? Number(m[2]) : NaN;
  if (!m || min < 1024 || max > 65535 || min > max) {
    throw new UsageError(
      `${source} must be <min>-<max>, two port numbers from 1024 to 65535 with min ≤ max (like 4100-4999), not '${text}'`,
    );
  }
  return { min, max };
}

/** The flag if given, else $RUNLOG_PORTS if set, else undefined (the supervisor's default range). */
export function portRangeOf(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): PortRange | undefined {
  if (flag !== undefined) return parsePortRange(flag);
  const fromEnv = env.RUNLOG_PORTS;
  return fromEnv ? parsePortRange(fromEnv, '$RUNLOG_PORTS') : undefined;
}
