// An at-run handler: an exported function taking (input, context). Its return value is the output.
export function greet(input, context) {
  context.log(`greeting ${input?.name ?? 'someone'}`);
  return { greeting: `Hello, ${input?.name ?? 'world'}!`, language: 'javascript', caller: context.callerDid ?? null };
}

export async function fail() {
  const err = new Error('this handler always fails');
  err.code = 'EXAMPLE_FAILURE';
  throw err;
}
