// Caller-supplied values (an execution's input) checked at the boundary, before anything is appended: the log
// stores JSON, so a value JSON cannot encode faithfully (a BigInt, a cycle, a function, NaN, a Map that would
// silently become {}) or one too deep or too large to encode safely is refused here, with every problem named,
// instead of throwing inside a shared commit later.
//
// The walk is iterative (no recursion: a 1,000,000-level array is refused, not a stack overflow) and counts the
// exact UTF-8 size of the JSON encoding as it goes, so a value whose encoding would exceed the bound (including a
// small object graph that shares one subtree many times) is refused after at most `maxBytes` units of work.
import { RunlogError, ValidationError } from './errors.ts';

export interface JsonInputLimits {
  /** Largest encoded size (UTF-8 bytes of JSON.stringify). */
  maxBytes: number;
  /** Deepest nesting of arrays and objects (a scalar is depth 0, `[1]` depth 1). */
  maxDepth: number;
}

/** The input's JSON encoding is larger than the operator allows (HTTP 413). */
export class InputTooLargeError extends RunlogError {
  constructor(what: string, maxBytes: number) {
    super(
      'INPUT_TOO_LARGE',
      `${what} encodes to more than ${maxBytes} bytes of JSON (the operator policy's input.maxBytes)`,
      { maxBytes },
    );
  }
}

const MAX_ISSUES = 20;

/** The deepest value a boundary may let in: the operator policy caps input.maxDepth and frameDepth here. */
export const MAX_JSON_DEPTH = 1000;

/**
 * The deepest JSON the event store encodes: a value at MAX_JSON_DEPTH inside an event's own wrapping
 * (`data.request.input`, …). Every supported Node line encodes and parses this depth; deeper is refused by the
 * store itself, the same way on every line (Node 22 and 24's JSON.stringify overflow the stack a few thousand
 * levels down, Node 26's does not, and a log must stay readable by every line).
 */
export const MAX_EVENT_DEPTH = MAX_JSON_DEPTH + 24;

/** An array or object JSON.stringify encodes as one (a value with toJSON, such as a Date, is encoded as what it returns). */
const isContainer = (v: unknown): v is object =>
  typeof v === 'object' && v !== null && typeof (v as { toJSON?: unknown }).toJSON !== 'function';

/** How deep, and over how many containers, the quick check below looks before the full walk takes over. */
const SHALLOW_DEPTH = 32;
const SHALLOW_CONTAINERS = 1024;

/**
 * The quick answer for the usual event, a few small levels: true when `value` (entered at `depth`) has no container
 * below level SHALLOW_DEPTH, found by plain recursion over at most `budget.left` containers. False says only that it
 * could not tell (deeper, larger, a cycle, or a subtree shared many times): nestedDeeperThan then walks it in full.
 * It allocates little (each object's list of values), where the full walk's map, set and frames cost more than
 * encoding a small event does.
 */
function shallowWithin(value: unknown, depth: number, budget: { left: number }): boolean {
  if (!isContainer(value)) return true;
  if (depth >= SHALLOW_DEPTH || --budget.left < 0) return false;
  for (const child of Array.isArray(value) ? (value as unknown[]) : Object.values(value))
    if (!shallowWithin(child, depth + 1, budget)) return false;
  return true;
}

type DepthFrame = { enter: unknown; depth: number } | { exit: object; children: object[] };

/**
 * Whether `value`, as JSON.stringify would encode it, nests arrays and objects deeper than `maxDepth` (a scalar is
 * depth 0, `[1]` depth 1). Iterative, it stops at the first branch too deep, and it visits a shared subtree once
 * (remembering how deep it goes), so its work is linear in the value's distinct objects. A cycle is not followed:
 * JSON.stringify refuses it and says so.
 */
export function nestedDeeperThan(value: unknown, maxDepth: number): boolean {
  if (maxDepth >= SHALLOW_DEPTH && shallowWithin(value, 0, { left: SHALLOW_CONTAINERS })) return false;
  const height = new Map<object, number>(); // done: how deep the object's deepest branch goes
  const onPath = new Set<object>();
  const stack: DepthFrame[] = [{ enter: value, depth: 0 }];
  while (stack.length > 0) {
    const f = stack.pop()!;
    if ('exit' in f) {
      let h = 0;
      for (const c of f.children) h = Math.max(h, height.get(c) ?? 0);
      height.set(f.exit, h + 1);
      onPath.delete(f.exit);
      continue;
    }
    const v = f.enter;
    if (!isContainer(v) || onPath.has(v)) continue;
    const known = height.get(v);
    if (known !== undefined) {
      if (f.depth + known > maxDepth) return true;
      continue;
    }
    if (f.depth + 1 > maxDepth) return true;
    const children = (Array.isArray(v) ? (v as unknown[]) : Object.values(v)).filter(isContainer);
    onPath.add(v);
    stack.push({ exit: v, children });
    for (const c of children) stack.push({ enter: c, depth: f.depth + 1 });
  }
  return false;
}

/** A key or index path for messages: input.a[3]["b c"]. */
function pathOf(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`;
}

const utf8 = (s: string): number => Buffer.byteLength(s, 'utf8');

function describe(v: unknown): string {
  if (typeof v === 'bigint') return 'a BigInt (JSON has no BigInt: send it as a string)';
  if (typeof v === 'function') return 'a function';
  if (typeof v === 'symbol') return 'a symbol';
  if (typeof v === 'undefined') return 'undefined';
  if (typeof v === 'number') return `${v} (JSON has no NaN or Infinity)`;
  const name =
    (Object.getPrototypeOf(v) as { constructor?: { name?: string } } | null)?.constructor?.name ?? 'an object';
  return `a ${name}, not a plain object or array${name === 'Date' ? ' (send date.toISOString())' : ''}`;
}

function isPlainObject(v: object): boolean {
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Where a walked value's copy goes: into its parent's copy (or the root's slot). */
type Put = (copy: unknown) => void;
type Frame = { kind: 'enter'; value: unknown; path: string; depth: number; put: Put } | { kind: 'exit'; value: object };

/** A checked value: the plain copy the walk made while checking, and the UTF-8 size of its JSON encoding. */
export interface CheckedJson {
  /** Plain arrays, objects and scalars only: encoding it again gives exactly `bytes` bytes. */
  value: unknown;
  bytes: number;
}

/**
 * Checks that `value` is plain JSON within `limits` and returns its encoded size. `undefined` at the top is
 * refused (JSON.stringify would return undefined); inside an object an undefined property is dropped by the
 * encoding and accepted, as JSON.stringify does. Throws ValidationError `INPUT_INVALID` listing the problems
 * (cycles, BigInt, functions, symbols, non-finite numbers, non-plain objects, too deep), or
 * InputTooLargeError `INPUT_TOO_LARGE`.
 */
export function checkJsonInput(value: unknown, limits: JsonInputLimits, what = 'input'): number {
  return snapshotJsonInput(value, limits, what).bytes;
}

/**
 * Checks `value` as checkJsonInput does and returns the copy that was checked: every property (a getter, a Proxy
 * trap) is read exactly once, by the check, so what is stored is what was checked. A getter that answers the
 * check with something small and a later read with something large cannot slip the large one past the limits.
 */
export function snapshotJsonInput(value: unknown, limits: JsonInputLimits, what = 'input'): CheckedJson {
  try {
    return walk(value, limits, what);
  } catch (err) {
    if (err instanceof RunlogError) throw err;
    // A getter or a Proxy trap that throws: the value cannot be read, so it cannot be encoded either.
    throw new ValidationError(
      'INPUT_INVALID',
      `${what} cannot be read as JSON: ${err instanceof Error ? err.message : String(err)}`,
      ['unreadable value'],
    );
  }
}

function walk(value: unknown, limits: JsonInputLimits, what: string): CheckedJson {
  const issues: string[] = [];
  const ancestors = new Set<object>();
  let root: unknown = null;
  const stack: Frame[] = [{ kind: 'enter', value, path: what, depth: 0, put: (c) => (root = c) }];
  let bytes = 0;
  let tooDeep = false;
  const add = (n: number) => {
    bytes += n;
    if (bytes > limits.maxBytes) throw new InputTooLargeError(what, limits.maxBytes);
  };
  while (stack.length > 0 && issues.length < MAX_ISSUES) {
    const f = stack.pop()!;
    if (f.kind === 'exit') {
      ancestors.delete(f.value);
      continue;
    }
    const v = f.value;
    if (v === null || typeof v === 'boolean') {
      add(v === false ? 5 : 4); // null, true / false
      f.put(v);
      continue;
    }
    if (typeof v === 'string') {
      add(utf8(JSON.stringify(v)));
      f.put(v);
      continue;
    }
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) issues.push(`${f.path} is ${describe(v)}`);
      else add(String(v).length);
      f.put(v);
      continue;
    }
    if (typeof v !== 'object') {
      issues.push(`${f.path} is ${describe(v)}`);
      continue;
    }
    if (ancestors.has(v)) {
      issues.push(`${f.path} refers back to one of its own ancestors (a cycle)`);
      continue;
    }
    if (f.depth + 1 > limits.maxDepth) {
      // One message for the deepest branch is enough: a 5,000-level value is one problem, not 4,936.
      if (!tooDeep)
        issues.push(`${f.path} is nested deeper than ${limits.maxDepth} levels (the operator policy's input.maxDepth)`);
      tooDeep = true;
      continue;
    }
    const isArray = Array.isArray(v);
    if (!isArray && !isPlainObject(v)) {
      issues.push(`${f.path} is ${describe(v)}`);
      continue;
    }
    ancestors.add(v);
    stack.push({ kind: 'exit', value: v });
    if (isArray) {
      const arr = v as unknown[];
      const length = arr.length; // read once: a Proxy's length could change between reads
      const copy = new Array<unknown>(length).fill(null);
      f.put(copy);
      add(2 + Math.max(0, length - 1)); // brackets and commas
      for (let i = length - 1; i >= 0; i--) {
        const item = arr[i];
        // JSON.stringify writes null for these inside arrays: refuse instead of changing the value.
        stack.push({
          kind: 'enter',
          value: item,
          path: pathOf(f.path, i),
          depth: f.depth + 1,
          put: (c) => (copy[i] = c),
        });
      }
    } else {
      const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
      const copy: Record<string, unknown> = {};
      f.put(copy);
      add(2 + Math.max(0, entries.length - 1));
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, x] = entries[i]!;
        add(utf8(JSON.stringify(k)) + 1); // "key":
        // Defined as own data properties: a key such as "__proto__" stays a key, as JSON.parse would make it.
        stack.push({
          kind: 'enter',
          value: x,
          path: pathOf(f.path, k),
          depth: f.depth + 1,
          put: (c) =>
            Object.defineProperty(copy, k, { value: c, enumerable: true, writable: true, configurable: true }),
        });
      }
    }
  }
  if (issues.length > 0) {
    throw new ValidationError(
      'INPUT_INVALID',
      `${what} is not plain JSON within the operator's limits${issues.length === 1 ? `: ${issues[0]}` : ''}`,
      issues,
    );
  }
  return { value: root, bytes };
}
