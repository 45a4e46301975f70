// The fixed filesystem layout of the runner-owned sandbox and the operator-owned supervisor command.
// The command is computed here, as an argv array, from the runtime record's launcher: never through a shell.
import { ValidationError } from '../../domain/errors.ts';
import { canonicalAbsolutePath, canonicalRelativePath } from '../../domain/at-run/safe-path.ts';

export const SANDBOX_ROOT = '/opt/at-run';
export const RUNTIME_MOUNT = '/opt/at-run/runtime';
export const APP_MOUNT = '/opt/at-run/app';
export const WORK_MOUNT = '/opt/at-run/work';
export const ADDITIONS_MOUNT = '/opt/at-run/additions';
/** Where a never-started materializer container sees the volume it fills. */
export const MATERIALIZE_TARGET = '/at-run-output';
/** The fixed export directory of addition images; authors cannot choose another. */
export const ADDITION_EXPORT_PATH = '/at-run/addition';
export const ENTRYPOINT_PLACEHOLDER = '{entrypoint}';

export interface Launcher {
  /** Executable relative to the runtime root, e.g. `bin/node`. */
  path: string;
  /** Arguments; exactly one is the literal `{entrypoint}`. */
  args: readonly string[];
}

// eslint-disable-next-line no-control-regex
const SHELL_SYNTAX = /[\s\u0000-\u001f\u007f|&;<>()$`\\"'*?[\]#~!{}]/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Problems with a path that must stay inside the directory it is relative to ([] when fine). */
export function relativePathProblems(what: string, p: string): string[] {
  if (typeof p !== 'string') return [`${what} must be a string`];
  return canonicalRelativePath(p).problems.map((x) => `${what} ${JSON.stringify(p)} ${x.message}`);
}

/** Problems with an absolute container path (an export path) ([] when fine). */
export function absolutePathProblems(what: string, p: string): string[] {
  if (typeof p !== 'string') return [`${what} must be a string`];
  return canonicalAbsolutePath(p).problems.map((x) => `${what} ${JSON.stringify(p)} ${x.message}`);
}

export function launcherProblems(launcher: Launcher): string[] {
  const problems = relativePathProblems('launcher.path', launcher.path);
  if (SHELL_SYNTAX.test(launcher.path)) problems.push('launcher.path contains shell syntax');
  const args = Array.isArray(launcher.args) ? launcher.args : [];
  if (!Array.isArray(launcher.args)) problems.push('launcher.args must be an array');
  const placeholders = args.filter((a) => a === ENTRYPOINT_PLACEHOLDER).length;
  if (placeholders !== 1)
    problems.push(`launcher.args must contain exactly one ${ENTRYPOINT_PLACEHOLDER}, found ${placeholders}`);
  args.forEach((a, i) => {
    if (typeof a !== 'string') problems.push(`launcher.args[${i}] is not a string`);
    else if (a !== ENTRYPOINT_PLACEHOLDER && SHELL_SYNTAX.test(a))
      problems.push(`launcher.args[${i}] contains shell syntax: ${JSON.stringify(a)}`);
  });
  return problems;
}

export function envProblems(env: Record<string, string>): string[] {
  const problems: string[] = [];
  for (const [k, v] of Object.entries(env)) {
    if (!ENV_NAME.test(k)) problems.push(`environment name ${JSON.stringify(k)} is not portable (letters, digits, _)`);
    if (typeof v !== 'string') problems.push(`environment value of ${k} is not a string`);
    else if (v.includes('\0')) problems.push(`environment value of ${k} contains a NUL byte`);
  }
  return problems;
}

/**
 * argv of the sandbox's process: `/opt/at-run/runtime/<launcher.path>` then the launcher's args with the one
 * `{entrypoint}` replaced by `/opt/at-run/app/<entrypoint>`. Throws ValidationError listing every problem.
 */
export function sandboxCommand(launcher: Launcher, entrypoint: string): string[] {
  const problems = [...launcherProblems(launcher), ...relativePathProblems('entrypoint', entrypoint)];
  if (problems.length > 0)
    throw new ValidationError('SANDBOX_COMMAND_INVALID', 'cannot build the sandbox command', problems);
  return [
    `${RUNTIME_MOUNT}/${launcher.path}`,
    ...launcher.args.map((a) => (a === ENTRYPOINT_PLACEHOLDER ? `${APP_MOUNT}/${entrypoint}` : a)),
  ];
}
