// The code of a rejection, for `expect(await codeOf(p)).toBe('SOME_CODE')`.

type ErrorClass = abstract new (...args: never[]) => Error & { code: string };

/**
 * Awaits `p` and returns the `code` of the error it rejects with. Fails when `p` resolves, and rethrows a
 * rejection that carries no string `code`.
 */
export function codeOf(p: Promise<unknown>): Promise<string> {
  return codeIf(p, () => true);
}

/** codeOf that also rethrows a rejection that is not an instance of one of `classes`. */
export function codeOfOnly(...classes: ErrorClass[]): (p: Promise<unknown>) => Promise<string> {
  return (p) => codeIf(p, (err) => classes.some((C) => err instanceof C));
}

async function codeIf(p: Promise<unknown>, allowed: (err: unknown) => boolean): Promise<string> {
  try {
    await p;
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (allowed(err) && typeof code === 'string') return code;
    throw err;
  }
  throw new Error('expected a rejection');
}
