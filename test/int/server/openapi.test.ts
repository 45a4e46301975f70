// docs/reference/openapi.json against real servers: every request it documents is sent, and each answer is checked
// with Ajv against the documented schema; the server's route table and the document list the same routes. A schema,
// a field or a route changed on one side only fails here. Two servers: a `runlog serve` process running a real PRoot
// app (its instance routes: spawn, tools, logs, kill), and the same HTTP face (startServer) over a real SQLite log
// seeded with instances and executions whose effects are fakes (the read routes and an execution, with no PDS).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiRouteTable } from '../../../src/server/api.ts';
import { startServer, type RunningServer } from '../../../src/server/http-server.ts';
import { ensureToken } from '../../../src/server/token.ts';
import { HELLO_APP_DIR, HELLO_APP_ID, requireProot } from '../../support/apps.ts';
import { seededRunlog, type Seeded } from '../../support/browser.ts';
import { REPO } from '../../support/cli.ts';
import { startServe, type Served } from '../../support/cli-process.ts';
import { freshDirs } from '../../support/tmp.ts';

type Schema = Record<string, unknown>;
interface Operation {
  parameters: Schema[];
  requestBody?: { content: { 'application/json': { schema: Schema } } };
  responses: Record<string, { content: Record<string, { schema: Schema; 'x-itemSchema'?: Schema }> }>;
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

const DOC_URL = 'https://runlog.invalid/openapi.json';
// The document's references point into it; Ajv reads them from one schema holding every component.
const text = readFileSync(join(REPO, 'docs/reference/openapi.json'), 'utf8').replaceAll(
  '"#/components/schemas/',
  `"${DOC_URL}#/$defs/`,
);
const doc = JSON.parse(text) as Document;
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema({ $id: DOC_URL, $defs: doc.components.schemas });
const validators = new Map<Schema, ValidateFunction>();
function validate(schema: Schema, value: unknown): string[] {
  let v = validators.get(schema);
  if (!v) validators.set(schema, (v = ajv.compile(schema)));
  return v(value)
    ? []
    : (v.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
}

const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.entries(ops).map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, op })),
);

/** One request per documented operation, in an order that leaves each its actor in the state it needs. */
interface Example {
  key: string;
  /** `serve`: the `runlog serve` process with real PRoot; otherwise the seeded server. */
  on?: 'serve';
  path: Record<string, string>;
  query?: Record<string, string>;
  body?: Record<string, unknown>;
}

const dirs = freshDirs('runlog-openapi-', 'all');

describe('the OpenAPI document against a running server', () => {
  let seeded: Seeded;
  let server: RunningServer;
  let token: string;
  let served: Served;
  let servedToken: string;

  beforeAll(async () => {
    requireProot();
    const home = dirs();
    seeded = await seededRunlog(home);
    token = ensureToken(home).token;
    server = await startServer({ runlog: seeded.rl, host: '127.0.0.1', port: 0, token, pollMs: 50 });
    served = await startServe(dirs());
    if (!served.info) throw new Error(`runlog serve did not start:\n${served.output()}`);
    servedToken = readFileSync(served.info.tokenFile, 'utf8').trim();
  });

  afterAll(async () => {
    await server?.close();
    await seeded?.rl.close();
    if (served?.child.exitCode === null) {
      served.child.kill('SIGTERM');
      await served.exit;
    }
  });

  const examples = (): Example[] => {
    const { instanceId, executionId, stoppedId } = seeded;
    return [
      { key: 'GET /api/health', path: {} },
      { key: 'GET /api/nodes', path: {} },
      { key: 'GET /api/actors', path: {}, query: { kind: 'instance', all: '1' } },
      { key: 'GET /api/actors/{id}', path: { id: executionId } },
      {
        key: 'GET /api/actors/{id}/events',
        path: { id: instanceId },
        query: { from: '1', to: '6', after: '1', limit: '2' },
      },
      {
        key: 'GET /api/actors/{id}/replay',
        path: { id: executionId },
        query: { to: '5', after: '0', limit: '3', steps: 'brief' },
      },
      { key: 'GET /api/events', path: {}, query: { afterSeq: '0', limit: '5' } },
      { key: 'GET /api/events/stream', path: {}, query: { afterSeq: '0' } },
      { key: 'GET /api/actors/{id}/events/stream', path: { id: stoppedId }, query: { afterSeq: '0' } },
      { key: 'GET /api/machines/{kind}', path: { kind: 'execution' } },
      {
        key: 'POST /api/instances',
        on: 'serve',
        path: {},
        body: { appDir: HELLO_APP_DIR, sandbox: 'proot', instanceId: 'inst_api', node: 'any' },
      },
      { key: 'POST /api/apps/{id}/tools', on: 'serve', path: { id: HELLO_APP_ID }, body: { tool: 'git' } },
      { key: 'DELETE /api/apps/{id}/tools/{tool}', on: 'serve', path: { id: HELLO_APP_ID, tool: 'git' } },
      { key: 'GET /api/actors/{id}/logs', on: 'serve', path: { id: 'inst_api' }, query: { follow: '0' } },
      { key: 'POST /api/reconcile', path: {}, body: { dryRun: true } },
      {
        key: 'POST /api/executions',
        path: {},
        body: {
          uri: 'at://did:plc:alice/dev.mainasara.at-run.beta.v2.code/add',
          handler: 'add',
          input: { a: 1, b: 2 },
          timeoutMs: 30_000,
          callerDid: 'did:plc:bob',
          node: 'any',
          nodeWaitMs: 0,
        },
      },
      { key: 'POST /api/actors/{id}/stop', path: { id: instanceId }, body: { graceMs: 10 } },
      { key: 'POST /api/actors/{id}/kill', on: 'serve', path: { id: 'inst_api' }, body: {} },
    ];
  };

  /** The first message of a stream (an SSE `data:` line, an NDJSON line), then the connection is dropped. */
  async function firstItem(res: Response, contentType: string): Promise<unknown> {
    const reader = res.body!.getReader();
    let buffered = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (value) buffered += new TextDecoder().decode(value);
        const line =
          contentType === 'text/event-stream' ? /^data: (.*)$/m.exec(buffered)?.[1] : /^(.*)\n/.exec(buffered)?.[1];
        if (line !== undefined) return JSON.parse(line);
        if (done) throw new Error(`the stream ended without a message: ${JSON.stringify(buffered)}`);
      }
    } finally {
      await reader.cancel();
    }
  }

  it('documents exactly the routes of the server’s route table', () => {
    const table = apiRouteTable().map((r) => r.replace(/:([a-z]+)/g, '{$1}'));
    expect(operations.map((o) => o.key).sort()).toEqual([...table].sort());
  });

  it('answers every documented request as its schema says, each query parameter and body field sent once at least', async () => {
    const list = examples();
    expect(list.map((e) => e.key).sort(), 'one request per documented operation').toEqual(
      operations.map((o) => o.key).sort(),
    );
    const problems: string[] = [];
    for (const ex of list) {
      const { op } = operations.find((o) => o.key === ex.key)!;
      const [method, template] = ex.key.split(' ') as [string, string];
      // What is sent is what the document allows: every documented parameter and field, each valid.
      for (const p of op.parameters.filter((x) => x.in === 'query')) {
        const name = p.name as string;
        if (ex.query?.[name] === undefined) problems.push(`${ex.key}: the test sends no ?${name}`);
        else if (
          validate(
            p.schema as Schema,
            /^\d+$/.test(ex.query[name]) && (p.schema as Schema).type === 'integer'
              ? Number(ex.query[name])
              : ex.query[name],
          ).length > 0
        )
          problems.push(`${ex.key}: ?${name}=${ex.query[name]} is not what the document allows`);
      }
      const bodySchema = op.requestBody?.content['application/json'].schema;
      if (bodySchema) {
        for (const f of Object.keys((bodySchema.properties as Schema | undefined) ?? {}))
          if (ex.body?.[f] === undefined) problems.push(`${ex.key}: the test sends no body field ${f}`);
        for (const e of validate(bodySchema, ex.body ?? {}))
          problems.push(`${ex.key}: the body sent is not what the document allows: ${e}`);
      }
      const path = template.replace(/\{([a-z]+)\}/g, (_, name: string) => encodeURIComponent(ex.path[name]!));
      const [base, bearer] = ex.on === 'serve' ? [served.info!.url, servedToken] : [server.url, token];
      const url = `${base}${path.slice(1)}${ex.query ? `?${new URLSearchParams(ex.query)}` : ''}`;
      const res = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${bearer}`,
          'runlog-deadline': String(Date.now() + 60_000),
          ...(ex.body ? { 'content-type': 'application/json' } : {}),
        },
        ...(ex.body ? { body: JSON.stringify(ex.body) } : {}),
        signal: AbortSignal.timeout(30_000),
      });
      const [status, documented] = Object.entries(op.responses).find(([s]) => s !== 'default')!;
      const [contentType, media] = Object.entries(documented.content)[0]!;
      if (String(res.status) !== status) {
        problems.push(`${ex.key}: ${res.status} (documented: ${status}): ${await res.text()}`);
        continue;
      }
      expect(res.headers.get('content-type') ?? '', ex.key).toContain(contentType);
      const answer = media['x-itemSchema'] ? await firstItem(res, contentType) : await res.json();
      for (const e of validate(media['x-itemSchema'] ?? media.schema, answer)) problems.push(`${ex.key}: ${e}`);
    }
    expect(problems).toEqual([]);
  });

  it('answers a refused request with the documented error', async () => {
    const res = await fetch(`${server.url}api/actors/inst_none`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(404);
    const schema = doc.paths['/api/actors/{id}']!.get!.responses.default!.content['application/json']!.schema;
    expect(validate(schema, await res.json())).toEqual([]);
  });
});
