// Lexical path checks shared by the archive validator and the record validators. Pure string work: nothing
// here touches a filesystem. Two flavours:
//
//  - `archiveMemberPath` for names found in tar headers. Harmless spelling variants that every extractor
//    reads the same way are normalized (`./a`, `a//b`, a trailing `/` on a directory); everything that
//    could leave the extraction root or confuse a parser is a problem.
//  - `canonicalRelativePath` / `canonicalAbsolutePath` for paths written in records (entrypoint, launcher,
//    export path). Those must already be canonical: no `.` or empty components, no trailing slash.

/** Linux PATH_MAX: no path (archive member, link target, record path) may be longer, in UTF-8 bytes. */
export const MAX_PATH_BYTES = 4096;
/** Linux NAME_MAX: no single component may be longer, in UTF-8 bytes. */
export const MAX_COMPONENT_BYTES = 255;
/** Deeper paths are refused (node-tar CVE-2024-28863: depth as a denial of service). */
export const MAX_PATH_DEPTH = 128;

export type PathProblemKind =
  | 'EMPTY'
  | 'NUL'
  | 'CONTROL_CHAR'
  | 'BACKSLASH'
  | 'ABSOLUTE'
  | 'NOT_ABSOLUTE'
  | 'TRAVERSAL'
  | 'TOO_LONG'
  | 'COMPONENT_TOO_LONG'
  | 'TOO_DEEP'
  | 'NOT_CANONICAL';

export interface PathProblem {
  kind: PathProblemKind;
  message: string;
}

export interface PathCheck {
  /** The normalized components (empty for the root). Meaningful only when `problems` is empty. */
  components: string[];
  /** True when the spelling ended in `/`. */
  trailingSlash: boolean;
  problems: PathProblem[];
}

const encoder = new TextEncoder();
export const utf8Length = (s: string): number => encoder.encode(s).length;

// eslint-disable-next-line no-control-regex
const CONTROL_RE = /[\u0001-\u001f\u007f]/;

/** Problems that do not depend on how the path is split (length, NUL, control characters, backslash). */
function characterProblems(p: string): PathProblem[] {
  const problems: PathProblem[] = [];
  if (p.includes('\u0000')) problems.push({ kind: 'NUL', message: 'contains a NUL byte' });
  if (CONTROL_RE.test(p)) problems.push({ kind: 'CONTROL_CHAR', message: 'contains a control character' });
  // A backslash is an ordinary byte on Linux but a separator for other extractors (zip-slip-win).
  if (p.includes('\\')) problems.push({ kind: 'BACKSLASH', message: 'contains a backslash' });
  return problems;
}

function componentProblems(components: readonly string[]): PathProblem[] {
  const problems: PathProblem[] = [];
  if (components.includes('..')) problems.push({ kind: 'TRAVERSAL', message: 'contains a ".." component' });
  const long = components.find((c) => utf8Length(c) > MAX_COMPONENT_BYTES);
  if (long !== undefined)
    problems.push({ kind: 'COMPONENT_TOO_LONG', message: `has a component longer than ${MAX_COMPONENT_BYTES} bytes` });
  if (components.length > MAX_PATH_DEPTH)
    problems.push({ kind: 'TOO_DEEP', message: `is deeper than ${MAX_PATH_DEPTH} components (${components.length})` });
  return problems;
}

/**
 * A member name from a tar header: relative, no `..`, no NUL/control/backslash, bounded length and depth.
 * `.` and empty components are dropped (`./a//b/` is `a/b`); the root itself (`.`, `./`) has no components.
 */
export function archiveMemberPath(name: string): PathCheck {
  if (name.length === 0)
    return { components: [], trailingSlash: false, problems: [{ kind: 'EMPTY', message: 'is empty' }] };
  if (utf8Length(name) > MAX_PATH_BYTES) {
    // Do not split a 400 KB name into 200 000 components: the length alone decides.
    return {
      components: [],
      trailingSlash: false,
      problems: [{ kind: 'TOO_LONG', message: `is longer than ${MAX_PATH_BYTES} bytes (${utf8Length(name)})` }],
    };
  }
  const problems = characterProblems(name);
  if (name.startsWith('/')) problems.push({ kind: 'ABSOLUTE', message: 'is absolute' });
  const components = name.split('/').filter((c) => c !== '' && c !== '.');
  problems.push(...componentProblems(components));
  return { components, trailingSlash: name.endsWith('/'), problems };
}

/**
 * A path written in a record, relative to some root (entrypoint, launcher): non-empty, relative, already
 * canonical (no `.` or empty components, no trailing slash), no `..`, no NUL/control/backslash.
 */
export function canonicalRelativePath(p: string): PathCheck {
  if (p.length === 0)
    return { components: [], trailingSlash: false, problems: [{ kind: 'EMPTY', message: 'is empty' }] };
  if (utf8Length(p) > MAX_PATH_BYTES)
    return {
      components: [],
      trailingSlash: false,
      problems: [{ kind: 'TOO_LONG', message: `is longer than ${MAX_PATH_BYTES} bytes` }],
    };
  const problems = characterProblems(p);
  if (p.startsWith('/')) problems.push({ kind: 'ABSOLUTE', message: 'must be relative, not absolute' });
  const raw = p.split('/');
  const components = raw.filter((c) => c !== '');
  if (!p.startsWith('/') && raw.some((c) => c === '' || c === '.')) {
    problems.push({
      kind: 'NOT_CANONICAL',
      message: 'must be canonical: no "." or empty components and no trailing "/"',
    });
  }
  problems.push(...componentProblems(components));
  return { components, trailingSlash: p.endsWith('/'), problems };
}

/** An absolute container path (export path): starts with `/`, is not `/` itself, otherwise canonical. */
export function canonicalAbsolutePath(p: string): PathCheck {
  if (p.length === 0)
    return { components: [], trailingSlash: false, problems: [{ kind: 'EMPTY', message: 'is empty' }] };
  if (utf8Length(p) > MAX_PATH_BYTES)
    return {
      components: [],
      trailingSlash: false,
      problems: [{ kind: 'TOO_LONG', message: `is longer than ${MAX_PATH_BYTES} bytes` }],
    };
  const problems = characterProblems(p);
  if (!p.startsWith('/')) {
    problems.push({ kind: 'NOT_ABSOLUTE', message: 'must be absolute (start with "/")' });
  }
  const raw = (p.startsWith('/') ? p.slice(1) : p).split('/');
  const components = raw.filter((c) => c !== '');
  if (p === '/')
    problems.push({ kind: 'NOT_CANONICAL', message: 'must name a directory below "/", not the root itself' });
  else if (raw.some((c) => c === '' || c === '.'))
    problems.push({
      kind: 'NOT_CANONICAL',
      message: 'must be normalized: no "//", no "." components and no trailing "/"',
    });
  problems.push(...componentProblems(components));
  return { components, trailingSlash: p.endsWith('/'), problems };
}
