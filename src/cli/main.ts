// `runlog <command> …`: parses the command line, dispatches, maps errors to exit codes
// (0 ok, 1 not found / failure found, 2 usage or internal error).
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { UsageError } from '../domain/errors.ts';
import { commonOptions, type Command } from './command.ts';
import { exportCommand } from './commands/debug-commands.ts';
import { eventsCommand, inspectCommand, psCommand, rebuildCommand, replayCommand } from './commands/inspect-commands.ts';
import { demoCommand } from './commands/demo.ts';
import { publishCommand } from './commands/publish-commands.ts';
import { serveCommand } from './commands/serve.ts';
import { capCommand, execCommand, killCommand, logsCommand, reconcileCommand, spawnCommand, stopCommand } from './commands/supervise-commands.ts';
import { EXIT, processIo, reportError, type Io } from './output.ts';

export const commands: Command[] = [
  serveCommand,
  demoCommand,
  spawnCommand,
  stopCommand,
  killCommand,
  capCommand,
  logsCommand,
  execCommand,
  publishCommand,
  reconcileCommand,
  psCommand,
  inspectCommand,
  eventsCommand,
  replayCommand,
  exportCommand,
  rebuildCommand,
];

export function registerCommand(c: Command): void {
  commands.push(c);
}

function help(io: Io): void {
  io.out('runlog — an event-sourced supervisor for sandboxed work\n\nusage: runlog <command> [options]\n\ncommands:');
  for (const c of commands) io.out(`  ${c.name.padEnd(10)} ${c.summary}`);
  io.out('\nevery command takes --db <path> (default $RUNLOG_HOME/runlog.db, else ~/.runlog/runlog.db) and --json');
}

/** package.json's version; src/cli and dist/cli sit at the same depth below it. */
export function version(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

export async function main(argv: string[], ioFactory: (json: boolean) => Io = processIo): Promise<number> {
  const json = argv.includes('--json');
  const io = ioFactory(json);
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    help(io);
    return name ? EXIT.ok : EXIT.error;
  }
  if (name === '--version' || name === '-v') {
    io.out(version());
    return EXIT.ok;
  }
  const cmd = commands.find((c) => c.name === name);
  if (!cmd) {
    io.err(`runlog: unknown command '${name}' (runlog --help lists them)`);
    return EXIT.error;
  }
  try {
    let parsed;
    try {
      parsed = parseArgs({ args: rest, options: { ...commonOptions, ...cmd.options }, allowPositionals: true, strict: true });
    } catch (err) {
      throw new UsageError(`${(err as Error).message}\nusage: ${cmd.usage}`);
    }
    if (parsed.values.help) {
      io.out(`${cmd.summary}\nusage: ${cmd.usage}`);
      return EXIT.ok;
    }
    return await cmd.run(
      { positionals: parsed.positionals, values: parsed.values as never, db: parsed.values.db as string | undefined, home: parsed.values.home as string | undefined },
      io,
    );
  } catch (err) {
    return reportError(io, err);
  }
}
