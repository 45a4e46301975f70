#!/usr/bin/env node
// runlog's CLI: the compiled JavaScript in dist/ (no loader at run time). In a checkout, `npm ci` builds dist/
// (the `prepare` script); after editing src/, `npm run build`.
try {
  await import('../dist/cli/bin.js');
} catch (err) {
  if (err?.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/cli/bin.js')) {
    console.error('runlog: dist/ is missing (a checkout that was not built): run `npm run build`');
    process.exit(2);
  }
  throw err;
}
