// A job's execution id is derived from its record version, so every node and every restart names the same stream.
import { describe, expect, it } from 'vitest';
import { jobExecutionId } from '../../../src/adapters/ids.ts';
import { isValidRecordKey } from '../../../src/adapters/atproto/syntax.ts';

const URI = 'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/dev.mainasara.at-run.beta.v2.job/3kabcdefgh2aa';
const CID = 'bafyreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku';

describe('jobExecutionId', () => {
  it('gives the same id for the same job record version, and another for another version or record', () => {
    const id = jobExecutionId(URI, CID);
    expect(jobExecutionId(URI, CID)).toBe(id);
    expect(jobExecutionId(URI, CID.replace(/u$/, 'a'))).not.toBe(id);
    expect(jobExecutionId(URI.replace(/aa$/, 'ab'), CID)).not.toBe(id);
  });

  it('is shaped like the other execution ids, and is a valid record key for its receipt', () => {
    const id = jobExecutionId(URI, CID);
    expect(id).toMatch(/^exec_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(isValidRecordKey(id)).toBe(true);
  });
});
