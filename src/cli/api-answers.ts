// What each mutating command reads from the supervisor's answer, checked before it is read. server.json is
// trusted (this user wrote it), but the port it names may since have been taken by another program: its answer
// must then be a typed BAD_RESPONSE saying the server there is not a runlog supervisor, not a TypeError from
// deep inside the printing ("Cannot read properties of undefined").
import { RunlogError } from '../domain/errors.ts';

type FieldType = 'string' | 'object' | 'array';

export interface AnswerShape {
  what: string;
  fields: Readonly<Record<string, FieldType>>;
}

/** The fields each command reads (the API's views carry more; only these are required). */
export const ANSWERS = {
  actor: { what: 'an actor view', fields: { id: 'string', kind: 'string', state: 'string', context: 'object' } },
  appTools: { what: "an app's tools view", fields: { appId: 'string', tools: 'array', instances: 'array' } },
  execution: { what: 'an execution outcome', fields: { executionId: 'string', status: 'string' } },
  reconcile: { what: 'a reconcile report', fields: { actions: 'array', unreachable: 'array' } },
} as const satisfies Record<string, AnswerShape>;

function hasType(v: unknown, t: FieldType): boolean {
  if (t === 'array') return Array.isArray(v);
  if (t === 'object') return typeof v === 'object' && v !== null && !Array.isArray(v);
  return typeof v === t;
}

/** The error for an answer no runlog supervisor gives (`why`: what is wrong with it). */
export function notASupervisor(url: string, method: string, path: string, why: string): RunlogError {
  return new RunlogError(
    'BAD_RESPONSE',
    `the server at ${url} is not a runlog supervisor: ${method} ${path} answered ${why}. ` +
      'server.json names that address; is `runlog serve` still the one listening there?',
    { url, method, path },
  );
}

/** Throws BAD_RESPONSE unless `value` has every field `shape` requires, each of its type. */
export function checkAnswer(url: string, method: string, path: string, value: unknown, shape: AnswerShape): void {
  const obj =
    typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  const wrong = Object.entries(shape.fields)
    .filter(([k, t]) => !obj || !hasType(obj[k], t))
    .map(([k, t]) => `${k} (${t})`);
  if (wrong.length > 0)
    throw notASupervisor(
      url,
      method,
      path,
      `JSON that is not ${shape.what} (missing or not of its type: ${wrong.join(', ')})`,
    );
}
