// examples/hello-app carries the app SDK as a file (a symlink would not survive `npm pack`, and the sandboxes
// cannot see the repository): it must stay the SDK's exact copy.
import { lstatSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = join(import.meta.dirname, '../../..');

describe('examples/hello-app/runlog-app-sdk.mjs', () => {
  it('is a regular file equal to src/app-sdk/sdk.mjs', () => {
    const copy = join(REPO, 'examples/hello-app/runlog-app-sdk.mjs');
    expect(lstatSync(copy).isFile()).toBe(true);
    expect(readFileSync(copy, 'utf8')).toBe(readFileSync(join(REPO, 'src/app-sdk/sdk.mjs'), 'utf8'));
  });
});
