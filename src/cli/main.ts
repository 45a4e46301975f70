// `runlog <command> …`: parses the command line, dispatches, and turns errors into exit codes (output.ts,
// exitCodeFor: 0 ok, 1 failure / not found, 2 usage, 3 no supervisor, 4 damaged log, 5 conflict).
// Every module imported here is light; commands load what they need when they run.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { UsageError } from '../domain/errors.ts';
import { commandHelp, commonOptions, parseOptions, type Command, type CommandArgs } from './command.ts';
import { demoCommand } from './commands/demo.ts';
import {
  eventsCommand,
  exportCommand,
  inspectCommand,
  psCommand,
  rebuildCommand,
  replayCommand,
} from './commands/inspect-commands.ts';
import { jobCommand } from './commands/job-command.ts';
import { nodesCommand } from './commands/nodes-command.ts';
import { publishCommand } from './commands/publish-commands.ts';
import { runnerCommand, secretsCommand } from './commands/secrets-commands.ts';
import { serveCommand } from './commands/serve.ts';
import { verifyCommand } from './commands/verify-command.ts';
import { archiveCommand } from './commands/archive-command.ts';
import {
  capCommand,
  execCommand,
  killCommand,
  logsCommand,
  reconcileCommand,
  spawnCommand,
  stopCommand,
} from './commands/supervise-commands.ts';
import { EXIT, processIo, reportError, type Io } from './output.ts';
import { keepYoungGenerationSmall } from './young-generation.ts';

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
  jobCommand,
  runnerCommand,
  secretsCommand,
  reconcileCommand,
  psCommand,
  nodesCommand,
  inspectCommand,
  eventsCommand,
  replayCommand,
  exportCommand,
  rebuildCommand,
  verifyCommand,
  archiveCommand,
];

export function registerCommand(c: Command): void {
  commands.push(c);
}

/** The package's version (package.json sits two levels above both src/cli and dist/cli). */
export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string };
  return pkg.version ?? 'unknown';
}

function help(io: Io): void {
  io.out(
    'runlog — an event-sourced supervisor for sandboxed work\n\n' +
      'usage: runlog <command> [flags]   (runlog <command> --help: its flags and an example)\n\ncommands:',
  );
  for (const c of commands) io.out(`  ${c.name.padEnd(10)} ${c.summary}`);
  io.out(
    [
      '',
      'every command takes --home <dir> (default $RUNLOG_HOME, else ~/.runlog), --db <path> (default <home>/runlog.db) and --json',
      'runlog --version prints the version',
      '',
      'exit codes: 0 ok · 1 failure or not found · 2 usage · 3 no supervisor · 4 damaged or foreign log · ' +
        "5 conflict with the actor's state",
    ].join('\n'),
  );
}

/**
 * Edit distance, for "did you mean": insertions, deletions, substitutions and swaps of two neighbouring letters
 * (optimal string alignment), each 1 — a swap is the commonest typo ('sapwn'), and plain Levenshtein counts it 2.
 */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i]!;
      row[j] = Math.min(d[i - 1]![j]! + 1, row[j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** The commands a mistyped name most likely meant (closest first). */
export function suggest(name: string, names: readonly string[] = commands.map((c) => c.name)): string[] {
  const scored = names.map((n) => ({ n, d: n.startsWith(name) || name.startsWith(n) ? 1 : distance(name, n) }));
  const limit = Math.max(1, Math.min(2, Math.floor(name.length / 3)));
  return scored
    .filter((s) => s.d <= limit)
    .sort((a, b) => a.d - b.d)
    .map((s) => s.n);
}

export interface MainOptions {
  /** This process is the CLI's own (bin.ts), not a host calling main() in-process: V8 flags may be tuned for it. */
  ownProcess?: boolean;
}

export async function main(
  argv: string[],
  ioFactory: (json: boolean) => Io = processIo,
  options: MainOptions = {},
): Promise<number> {
  const json = argv.includes('--json');
  const io = ioFactory(json);
  const [name, ...rest] = argv;
  try {
    if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
      const topic = name === 'help' ? rest[0] : undefined;
      const cmd = topic ? commands.find((c) => c.name === topic) : undefined;
      if (topic && !cmd) throw unknownCommand(topic);
      if (cmd) io.out(commandHelp(cmd));
      else help(io);
      return EXIT.ok;
    }
    if (name === '--version' || name === '-v') {
      io.out(io.json ? JSON.stringify({ version: version() }) : version());
      return EXIT.ok;
    }
    const cmd = commands.find((c) => c.name === name);
    if (!cmd) throw unknownCommand(name);
    let parsed;
    try {
      parsed = parseArgs({
        args: rest,
        options: parseOptions({ ...commonOptions, ...cmd.options }),
        allowPositionals: true,
        strict: true,
      });
    } catch (err) {
      throw new UsageError(
        `${(err as Error).message}\nusage: ${cmd.usage}   (runlog ${cmd.name} --help lists every flag)`,
      );
    }
    if (parsed.values.help) {
      io.out(commandHelp(cmd));
      return EXIT.ok;
    }
    if (options.ownProcess && cmd.streams) keepYoungGenerationSmall();
    return await cmd.run(
      storeArgs({
        positionals: parsed.positionals,
        values: parsed.values as never,
        db: parsed.values.db as string | undefined,
        home: parsed.values.home as string | undefined,
      }),
      io,
    );
  } catch (err) {
    return reportError(io, err);
  }
}

/** --store (else $RUNLOG_STORE): a PostgreSQL URL goes to args.store, a file path to args.db (unless --db is given too). */
function storeArgs(args: CommandArgs): CommandArgs {
  const flag = args.values.store as string | undefined;
  // An explicit --db wins over the environment's store.
  const store = flag ?? (args.db === undefined ? process.env.RUNLOG_STORE || undefined : undefined);
  if (store === undefined) return args;
  if (/^postgres(ql)?:\/\//i.test(store)) {
    if (args.db !== undefined) throw new UsageError('give --store <postgres url> or --db <file>, not both');
    return { ...args, store };
  }
  if (args.values.store !== undefined && args.db !== undefined) throw new UsageError('give --store or --db, not both');
  return { ...args, db: args.db ?? store };
}

function unknownCommand(name: string): UsageError {
  const close = suggest(name);
  const hint = close.length > 0 ? `; did you mean ${close.map((c) => `'${c}'`).join(' or ')}?` : '';
  return new UsageError(`unknown command '${name}'${hint} (runlog --help lists them)`);
}
