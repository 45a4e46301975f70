// `runlog publish runtime|code`: writes at-run records to the author's PDS so nobody hand-crafts them.
// Credentials: --pds/--identifier/--password or RUNLOG_PDS_URL/RUNLOG_IDENTIFIER/RUNLOG_PASSWORD.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { discoverParts, requireImage } from '../../actors/parts.ts';
import { publishCode, publishRuntime } from '../../actors/publishing.ts';
import { createPublisher } from '../../adapters/atproto/index.ts';
import { UsageError } from '../../domain/errors.ts';
import { atprotoOptions } from '../client.ts';
import type { Command, CommandArgs } from '../command.ts';
import { EXIT, printJson } from '../output.ts';

async function publisherFrom(args: CommandArgs) {
  const pdsUrl = (args.values.pds as string | undefined) ?? process.env.RUNLOG_PDS_URL;
  const identifier = (args.values.identifier as string | undefined) ?? process.env.RUNLOG_IDENTIFIER;
  const password = (args.values.password as string | undefined) ?? process.env.RUNLOG_PASSWORD;
  if (!pdsUrl || !identifier || !password) {
    throw new UsageError('publishing needs an account: --pds <url> --identifier <handle|did> --password <app password> (or RUNLOG_PDS_URL, RUNLOG_IDENTIFIER, RUNLOG_PASSWORD)');
  }
  return createPublisher({ pdsUrl, identifier, password });
}

export const publishCommand: Command = {
  name: 'publish',
  summary: 'publish an at-run runtime record (from a template + image digest) or code record (from a directory)',
  usage:
    'runlog publish runtime <dir> [--image <name@sha256:…>] | runlog publish code <dir> --runtime <at-uri> [--entrypoint <path>]   [--pds <url> --identifier <id> --password <pw>] [--plc <url>] [--json]',
  options: {
    image: { type: 'string' },
    runtime: { type: 'string' },
    entrypoint: { type: 'string' },
    pds: { type: 'string' },
    identifier: { type: 'string' },
    password: { type: 'string' },
    plc: { type: 'string' },
    rkey: { type: 'string' },
  },
  async run(args, io) {
    const [what, dir] = args.positionals;
    if ((what !== 'runtime' && what !== 'code') || !dir) throw new UsageError(`usage: ${publishCommand.usage}`);
    if (what === 'code' && !args.values.runtime) throw new UsageError('publish code needs --runtime <at-uri of a runtime record>');
    const publisher = await publisherFrom(args);
    const rkey = args.values.rkey as string | undefined;
    if (what === 'runtime') {
      let image = args.values.image as string | undefined;
      if (!image) {
        const name = String((JSON.parse(readFileSync(join(dir, 'runtime-record.json'), 'utf8')) as { name?: unknown }).name ?? '');
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
