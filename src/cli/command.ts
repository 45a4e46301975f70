// A CLI command: its flags (each with a description and default, for --help and the README), a usage line,
// an example, and a run function that returns the exit code. Commands are thin: they call the library and
// print. A command module imports only light modules at its top; what a command needs to do its work it
// imports inside `run`, so `runlog ps` never loads Docker, AT Protocol, tar or XState code.
import type { ParseArgsConfig } from 'node:util';
import type { Io } from './output.ts';

export interface FlagSpec {
  type: 'string' | 'boolean';
  short?: string;
  /** A default parseArgs applies. */
  default?: string | boolean;
  /** The value's placeholder in help (`<ms>`). */
  value?: string;
  description: string;
  /** How the default reads in help when it is computed at run time ("$RUNLOG_HOME, else ~/.runlog"). */
  defaultText?: string;
}

export type FlagSpecs = Record<string, FlagSpec>;

export interface CommandArgs {
  positionals: string[];
  values: Record<string, string | boolean | string[] | undefined>;
  db: string | undefined;
  home: string | undefined;
  /** A PostgreSQL URL (from --store or $RUNLOG_STORE); a --store that is a file path arrives as db. */
  store?: string | undefined;
}

export interface Command {
  name: string;
  summary: string;
  usage: string;
  options?: FlagSpecs;
  /** At least one, shown by --help. */
  examples: string[];
  /** Streams a log or a file row by row: run as its own process, it keeps V8's young generation small (young-generation.ts). */
  streams?: boolean;
  run(args: CommandArgs, io: Io): Promise<number>;
}

export const commonOptions: FlagSpecs = {
  home: {
    type: 'string',
    value: '<dir>',
    description: "runlog's directory",
    defaultText: '$RUNLOG_HOME, else ~/.runlog',
  },
  db: { type: 'string', value: '<path>', description: 'the event log', defaultText: '<home>/runlog.db' },
  store: {
    type: 'string',
    value: '<url>',
    description:
      'the event log as a URL: postgres://user:pass@host:port/db[?schema=name] (shared by a cluster of supervisors), or a SQLite file path',
    defaultText: '$RUNLOG_STORE, else --db',
  },
  json: {
    type: 'boolean',
    default: false,
    description: 'machine-readable output with stable keys (errors: one JSON object on stderr)',
  },
  help: { type: 'boolean', short: 'h', default: false, description: 'this help' },
};

/** parseArgs' view of a command's flags. */
export function parseOptions(specs: FlagSpecs): NonNullable<ParseArgsConfig['options']> {
  const out: NonNullable<ParseArgsConfig['options']> = {};
  for (const [name, s] of Object.entries(specs)) {
    out[name] = {
      type: s.type,
      ...(s.short ? { short: s.short } : {}),
      ...(s.default !== undefined ? { default: s.default as never } : {}),
    };
  }
  return out;
}

function flagLines(specs: FlagSpecs): string[] {
  const left = Object.entries(specs).map(
    ([name, s]) => `${s.short ? `-${s.short}, ` : '    '}--${name}${s.value ? ` ${s.value}` : ''}`,
  );
  const width = Math.max(...left.map((l) => l.length)) + 2;
  return Object.values(specs).map((s, i) => {
    const def = s.defaultText ?? (s.default === undefined ? undefined : String(s.default));
    return `  ${left[i]!.padEnd(width)}${s.description}${def !== undefined ? ` (default: ${def})` : ''}`;
  });
}

/** `runlog <command> --help`: what it does, its usage, every flag with its default, and an example. */
export function commandHelp(c: Command): string {
  const own = c.options && Object.keys(c.options).length > 0 ? ['', 'flags:', ...flagLines(c.options)] : [];
  return [
    `runlog ${c.name} — ${c.summary}`,
    '',
    `usage: ${c.usage}`,
    ...own,
    '',
    'common flags:',
    ...flagLines(commonOptions),
    '',
    c.examples.length > 1 ? 'examples:' : 'example:',
    ...c.examples.map((e) => `  ${e}`),
  ].join('\n');
}
