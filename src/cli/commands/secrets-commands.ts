// `runlog runner keys list|rotate` (the runner's encryption keys, in its home) and `runlog secrets seal` (values
// sealed to a runner's advertised key, written as a secrets record in the caller's repo).
// Only light modules at the top (see command.ts): the key ring and AT Protocol code load when the command runs.
// Values are never printed: seal prints the record's strong ref and the names it holds.
import { resolvePaths } from '../../config/paths.ts';
import { UsageError } from '../../domain/errors.ts';
import type { Command, CommandArgs } from '../command.ts';
import { EXIT, printJson, table } from '../output.ts';
import { publishCommand, publisherFrom } from './publish-commands.ts';

export const runnerCommand: Command = {
  name: 'runner',
  summary: "this runner's encryption keys (secrets are sealed to them): list them, or rotate to a new one",
  usage: 'runlog runner keys list | runlog runner keys rotate --retire-old-at <datetime>   [--json]',
  options: {
    'retire-old-at': {
      type: 'string',
      value: '<datetime>',
      description:
        'rotate: until when the old key still opens secrets sealed to it (RFC 3339, required, in the future)',
    },
  },
  examples: ['runlog runner keys rotate --retire-old-at 2027-01-31T00:00:00Z', 'runlog runner keys list'],
  async run(args, io) {
    const [what, action] = args.positionals;
    if (what !== 'keys' || (action !== 'list' && action !== 'rotate') || args.positionals.length !== 2)
      throw new UsageError(`usage: ${runnerCommand.usage}`);
    const { runnerKeyRing } = await import('../../supervisor/executions/sealed-secrets-records.ts');
    const ring = runnerKeyRing(resolvePaths({ home: args.home }).home);
    if (action === 'rotate') {
      const retireOldAt = args.values['retire-old-at'] as string | undefined;
      if (!retireOldAt)
        throw new UsageError('rotate needs --retire-old-at <datetime>: until when the old key opens secrets');
      const r = ring.rotate({ retireOldAt });
      if (io.json) printJson(io, r);
      else io.out(r.current.publicKey);
      io.err(
        `runlog: ${r.retiring.publicKey} opens secrets until ${r.retiring.retiresAt}; ` +
          'the runner record advertises the new key when runlog serve next starts',
      );
      return EXIT.ok;
    }
    const keys = ring.list();
    if (io.json) printJson(io, { keys });
    else
      io.out(
        table(
          keys.map((k) => [k.publicKey, k.createdAt, k.current ? 'current' : (k.retiresAt ?? '-')]),
          ['PUBLIC KEY', 'CREATED', 'RETIRES'],
        ),
      );
    return EXIT.ok;
  },
};

/** NAME=value arguments and --from-env names, as entries; a malformed argument is named by position, never echoed. */
function secretEntries(args: CommandArgs, env: NodeJS.ProcessEnv): { name: string; value: string }[] {
  const entries = args.positionals.slice(1).map((arg, i) => {
    const eq = arg.indexOf('=');
    if (eq <= 0)
      throw new UsageError(`argument ${i + 2} is not NAME=value (its text is not shown: it may be a secret)`);
    return { name: arg.slice(0, eq), value: arg.slice(eq + 1) };
  });
  const fromEnv = ((args.values['from-env'] as string | undefined) ?? '').split(',').filter((n) => n !== '');
  for (const name of fromEnv) {
    const value = env[name];
    if (value === undefined) throw new UsageError(`--from-env ${name}: the environment has no ${name}`);
    entries.push({ name, value });
  }
  if (entries.length === 0) throw new UsageError('name at least one secret: NAME=value or --from-env NAME');
  return entries;
}

export const secretsCommand: Command = {
  name: 'secrets',
  summary: "seal values to a runner's encryption key and write them as a secrets record in your repo",
  usage:
    'runlog secrets seal --runner <did> [--code <at-uri>] [NAME=value …] [--from-env NAME[,NAME…]]   ' +
    '[--pds <url> --identifier <id> --password <pw>] [--plc <url>] [--json]',
  options: {
    runner: { type: 'string', value: '<did>', description: 'the runner the values are sealed to (required)' },
    code: {
      type: 'string',
      value: '<at-uri>',
      description: 'restrict the values to executions of this code (or alias) record',
      defaultText: 'any code the job names',
    },
    'from-env': {
      type: 'string',
      value: '<NAME[,NAME…]>',
      description:
        'seal these variables of your environment; ' +
        'NAME=value arguments are visible to other local users (ps, /proc), the environment is not',
    },
    pds: publishCommand.options!.pds!,
    identifier: publishCommand.options!.identifier!,
    password: publishCommand.options!.password!,
    plc: { ...publishCommand.options!.plc!, description: "PLC directory (to verify the runner's record)" },
  },
  examples: [
    'API_TOKEN=… runlog secrets seal --runner did:plc:abc ' +
      '--code at://did:plc:me/dev.mainasara.at-run.beta.v2.code/3kx --from-env API_TOKEN',
  ],
  async run(args, io) {
    if (args.positionals[0] !== 'seal') throw new UsageError(`usage: ${secretsCommand.usage}`);
    const runner = args.values.runner as string | undefined;
    if (!runner) throw new UsageError('seal needs --runner <did>: the runner whose key the values are sealed to');
    const entries = secretEntries(args, process.env);
    const publisher = await publisherFrom(args);
    const [{ sealSecretsFor }, { atprotoOptions }] = await Promise.all([
      import('../../supervisor/executions/sealed-secrets-records.ts'),
      import('../client.ts'),
    ]);
    const code = args.values.code as string | undefined;
    const r = await sealSecretsFor(publisher, {
      runner,
      ...(code !== undefined ? { code } : {}),
      entries,
      atproto: atprotoOptions(args.values.plc as string | undefined),
    });
    if (io.json) printJson(io, r);
    else io.out(`${r.uri}\n${r.cid}`);
    io.err(`runlog: sealed ${r.names.join(', ')} to ${r.recipientKey}; a job names this record by its URI and CID`);
    return EXIT.ok;
  },
};
