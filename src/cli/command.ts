// A CLI command: its options (node:util parseArgs), a usage line, and a run function that returns
// the exit code. Commands are thin: they call the library and print.
import type { ParseArgsConfig } from 'node:util';
import type { Io } from './output.ts';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;

export interface CommandArgs {
  positionals: string[];
  values: Record<string, string | boolean | string[] | undefined>;
  db: string | undefined;
  home: string | undefined;
}

export interface Command {
  name: string;
  summary: string;
  usage: string;
  options?: OptionSpec;
  run(args: CommandArgs, io: Io): Promise<number>;
}

export const commonOptions: OptionSpec = {
  db: { type: 'string' },
  home: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
};
