// The answers of the HTTP API as JSON Schema (2020-12, the dialect of OpenAPI 3.1), one per route of api.ts.
// Written once here: `npm run docs` puts them in docs/reference/openapi.json beside the routes, methods, query
// parameters and body fields it reads from api.ts, and test/int/server/openapi.test.ts checks every answer of a
// real server against them. Objects stay open (extra keys allowed) so a new field is not a breaking change.

/** A JSON Schema object, as OpenAPI 3.1 embeds it. */
export type JsonSchema = Record<string, unknown>;

/** What one route answers when it succeeds. */
export interface RouteAnswer {
  status: number;
  /** JSON by default; `text/event-stream` and `application/x-ndjson` carry `item`, the schema of each message. */
  contentType?: 'application/json' | 'text/event-stream' | 'application/x-ndjson';
  schema: JsonSchema;
}

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const bool = { type: 'boolean' } as const;
const nullable = (schema: JsonSchema): JsonSchema => ({ anyOf: [schema, { type: 'null' }] });
const obj = (properties: Record<string, JsonSchema>, required: string[] = Object.keys(properties)): JsonSchema => ({
  type: 'object',
  properties,
  required,
});
const ref = (name: keyof typeof components): JsonSchema => ({ $ref: `#/components/schemas/${name}` });

/** Shared shapes, named in the document's `components.schemas`. */
export const components = {
  Error: obj({
    error: obj({ code: str, message: str, issues: { type: 'array', items: str }, details: { type: 'object' } }, [
      'code',
      'message',
    ]),
  }),
  Supervision: obj(
    { supervised: bool, heartbeatAt: nullable(str), since: nullable(str), node: str, pid: nullable(int) },
    ['supervised'],
  ),
  ActorSummary: obj({
    id: str,
    kind: { enum: ['instance', 'execution'] },
    stream: str,
    state: str,
    status: { enum: ['active', 'terminal'] },
    version: int,
    createdAt: str,
    updatedAt: str,
    summary: { type: 'object' },
  }),
  ActorView: {
    allOf: [
      { $ref: '#/components/schemas/ActorSummary' },
      obj({ context: { type: 'object' }, traceId: nullable(str) }),
    ],
  },
  RecordedEvent: obj({
    seq: int,
    stream: str,
    version: int,
    type: str,
    schema: int,
    data: {},
    meta: { type: 'object' },
    at: str,
  }),
  ToolChange: obj({
    appId: str,
    tool: str,
    granted: bool,
    tools: { type: 'array', items: str },
    instances: { type: 'array', items: str },
    changed: { type: 'array' },
    pending: { type: 'array' },
    seq: int,
  }),
} satisfies Record<string, JsonSchema>;

const events = { type: 'array', items: ref('RecordedEvent') };
const next = nullable(int);

/** Keyed `METHOD /path` exactly as api.ts spells the route; the document lacks nothing the table has. */
export const routeAnswers: Record<string, RouteAnswer> = {
  'GET /api/health': {
    status: 200,
    schema: obj({
      ok: { const: true },
      home: str,
      db: str,
      pid: int,
      startedAt: str,
      live: int,
      lastSeq: int,
      supervision: ref('Supervision'),
    }),
  },
  'GET /api/nodes': {
    status: 200,
    schema: obj({
      cluster: bool,
      at: str,
      nodes: {
        type: 'array',
        items: obj({
          node: str,
          pid: nullable(int),
          beatAt: nullable(str),
          live: bool,
          owns: { type: 'array', items: str },
        }),
      },
      unowned: { type: 'array', items: str },
    }),
  },
  'GET /api/actors': { status: 200, schema: obj({ actors: { type: 'array', items: ref('ActorSummary') } }) },
  'GET /api/actors/:id': {
    status: 200,
    schema: { allOf: [ref('ActorView'), obj({ supervision: ref('Supervision'), traceUrl: nullable(str) })] },
  },
  'GET /api/actors/:id/events': {
    status: 200,
    schema: obj({ id: str, kind: { enum: ['instance', 'execution'] }, version: int, events, next }),
  },
  'GET /api/actors/:id/replay': {
    status: 200,
    schema: obj(
      {
        id: str,
        kind: str,
        to: int,
        version: int,
        state: {},
        context: { type: 'object' },
        steps: { type: 'array', items: { type: 'object' } },
        from: int,
        next,
      },
      ['id', 'kind', 'to', 'version', 'state', 'context', 'steps', 'from', 'next'],
    ),
  },
  'GET /api/events': { status: 200, schema: obj({ events }) },
  'GET /api/events/stream': { status: 200, contentType: 'text/event-stream', schema: ref('RecordedEvent') },
  'GET /api/actors/:id/events/stream': { status: 200, contentType: 'text/event-stream', schema: ref('RecordedEvent') },
  'GET /api/machines/:kind': { status: 200, schema: obj({ kind: str, id: str, root: { type: 'object' } }) },
  'POST /api/instances': { status: 201, schema: ref('ActorView') },
  'POST /api/actors/:id/stop': { status: 200, schema: ref('ActorView') },
  'POST /api/actors/:id/kill': { status: 200, schema: ref('ActorView') },
  'POST /api/apps/:id/tools': { status: 200, schema: ref('ToolChange') },
  'DELETE /api/apps/:id/tools/:tool': { status: 200, schema: ref('ToolChange') },
  'GET /api/actors/:id/logs': {
    status: 200,
    contentType: 'application/x-ndjson',
    schema: { anyOf: [obj({ stream: { enum: ['stdout', 'stderr'] }, line: str, at: str }), ref('Error')] },
  },
  'POST /api/reconcile': {
    status: 200,
    schema: obj({
      dryRun: bool,
      actions: { type: 'array', items: obj({ id: str, kind: str, action: str }) },
      unreachable: { type: 'array' },
    }),
  },
  'POST /api/executions': {
    status: 200,
    schema: obj(
      {
        executionId: str,
        status: { enum: ['succeeded', 'failed'] },
        output: {},
        failure: obj({ reason: str, code: str, message: str }),
        view: ref('ActorView'),
      },
      ['executionId', 'status', 'view'],
    ),
  },
};
