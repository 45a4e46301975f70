// `runlog publish runtime|code`: writes at-run records to the author's PDS so nobody hand-crafts them.
// Credentials: --pds/--identifier/--password or RUNLOG_PDS_URL/RUNLOG_IDENTIFIER/RUNLOG_PASSWORD.
// Only light modules at the top (see command.ts): AT Protocol code loads when the command runs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from '../../domain/errors.ts';
import type { Command, CommandArgs } from '../command.ts';
import { EXIT, printJson } from '../output.ts';

/**
 * The account a command writes records as: flags, else RUNLOG_PDS_URL, RUNLOG_IDENTIFIER, RUNLOG_PASSWORD.
 * `what` names what needs it in the usage error (publishing, `serve --jobs`, `job submit`).
 */
export async function publisherFrom(args: CommandArgs, what = 'publishing') {
  const pdsUrl = (args.values.pds as string | undefined) ?? process.env.RUNLOG_PDS_URL;
  const identifier = (args.values.identifier as string | undefined) ?? process.env.RUNLOG_IDENTIFIER;
  const password = (args.values.password as string | undefined) ?? process.env.RUNLOG_PASSWORD;
  if (!pdsUrl || !identifier || !password) {
    throw new UsageError(
      `${what} needs an account: --pds <url> --identifier <handle|did> --password <app password> ` +
        '(or RUNLOG_PDS_URL, RUNLOG_IDENTIFIER, RUNLOG_PASSWORD)',
    );
  }
  const { createPublisher } = await import('../../adapters/atproto/index.ts');
  return createPublisher({ pdsUrl, identifier, password });
}

export const publishCommand: Command = {
  name: 'publish',
  summary: 'publish an at-run runtime record (from a template + image digest) or code record (from a directory)',
  usage:
    'runlog publish runtime <dir> [--image <name@sha256:…>] | ' +
    'runlog publish code <dir> --runtime <at-uri> [--entrypoint <path>]   ' +
    '[--pds <url> --identifier <id> --password <pw>] [--plc <url>] [--json]',
  options: {
    image: {
      type: 'string',
      value: '<name@sha256:…>',
      description: 'runtime: the image, pinned by digest',
      defaultText: 'the runtime-<name> image npm run setup built',
    },
    runtime: { type: 'string', value: '<at-uri>', description: 'code: the runtime record the code runs on (required)' },
    entrypoint: {
      type: 'string',
      value: '<path>',
      description: 'code: the entrypoint inside the directory',
      defaultText: "the directory's manifest entrypoint",
    },
    pds: { type: 'string', value: '<url>', description: "the author's PDS", defaultText: '$RUNLOG_PDS_URL' },
    identifier: {
      type: 'string',
      value: '<handle|did>',
      description: 'the account',
      defaultText: '$RUNLOG_IDENTIFIER',
    },
    password: { type: 'string', value: '<pw>', description: 'its (app) password', defaultText: '$RUNLOG_PASSWORD' },
    plc: {
      type: 'string',
      value: '<url>',
      description: 'PLC directory (code: to verify the runtime record)',
      defaultText: '$RUNLOG_PLC_URL, else https://plc.directory',
    },
    rkey: {
      type: 'string',
      value: '<rkey>',
      description: 'the record key to write',
      defaultText: 'a TID the PDS chooses',
    },
  },
  examples: [
    'runlog publish code examples/greet-node --runtime at://did:plc:abc/dev.mainasara.at-run.beta.v2.runtime/node',
  ],
  async run(args, io) {
    const [what, dir] = args.positionals;
    if ((what !== 'runtime' && what !== 'code') || !dir) throw new UsageError(`usage: ${publishCommand.usage}`);
    if (what === 'code' && !args.values.runtime)
      throw new UsageError('publish code needs --runtime <at-uri of a runtime record>');
    const publisher = await publisherFrom(args);
    const [{ discoverParts, requireImage }, { publishCode, publishRuntime }, { atprotoOptions }] = await Promise.all([
      import('../../config/parts.ts'),
      import('../../supervisor/executions/publishing.ts'),
      import('../client.ts'),
    ]);
    const rkey = args.values.rkey as string | undefined;
    if (what === 'runtime') {
      let image = args.values.image as string | undefined;
      if (!image) {
        const name = String(
          (JSON.parse(readFileSync(join(dir, 'runtime-record.json'), 'utf8')) as { name?: unknown }).name ?? '',
        );
        image = requireImage(discoverParts(), `runtime-${name}`);
      }
      const r = await publishRuntime(publisher, { dir, image, ...(rkey ? { rkey } : {}) });
      if (io.json) printJson(io, { uri: r.uri, cid: r.cid, image });
      else io.out(`${r.uri}\n${r.cid}`);
      return EXIT.ok;
    }
    const r = await publishCode(publisher, {
      dir,
      runtime: String(args.values.runtime),
      ...(args.values.entrypoint ? { entrypoint: String(args.values.entrypoint) } : {}),
      atproto: atprotoOptions(args.values.plc as string | undefined),
      ...(rkey ? { rkey } : {}),
    });
    if (io.json) printJson(io, r);
    else io.out(`${r.uri}\n${r.cid}`);
    io.err(`runlog: run it with: runlog exec ${r.uri} <handler> --input '{}'`);
    return EXIT.ok;
  },
};
