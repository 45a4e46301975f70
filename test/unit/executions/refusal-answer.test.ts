// A job refused at intake is answered before its failure is recorded: the receipt (when this runner writes them)
// names the job and why, and the failure names the receipt, or says why it could not be written.
import { describe, expect, it } from 'vitest';
import type { Publisher } from '../../../src/adapters/atproto/index.ts';
import { AtprotoError } from '../../../src/adapters/atproto/index.ts';
import type { ExecutionRequest, FailedData } from '../../../src/domain/execution-events.ts';
import { answerRefusal, withJobReceipt } from '../../../src/supervisor/executions/execution-receipts.ts';
import { partial } from '../../support/partial.ts';

const DID = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa';
const JOB = {
  uri: `at://${DID}/dev.mainasara.at-run.beta.v2.job/3kabcdefgh2aa`,
  cid: 'bafyreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku',
};
const request: ExecutionRequest = {
  executionId: 'exec_Q2ZJ8W0R5X1M3K7T9B4N6P8H2C',
  uri: `at://${DID}/dev.mainasara.at-run.beta.v2.code/greet`,
  handler: 'greet',
  input: null,
  callerDid: DID,
  timeoutMs: 1000,
  job: JOB,
};
const refused = { code: 'JOB_EXPIRED', message: 'its notAfter (2026-01-01T00:00:00.000Z) has passed' };
const times = { startedAt: '2026-01-02T00:00:00.000Z', finishedAt: () => '2026-01-02T00:00:00.010Z' };

function recording() {
  const failed: FailedData[] = [];
  return { failed, dispatch: async (e: { data: FailedData }) => void failed.push(e.data) };
}

describe('answerRefusal', () => {
  it('writes the refusal receipt under the execution id, then records the failure naming it', async () => {
    const written: { collection: string; rkey: string; record: Record<string, unknown> }[] = [];
    const publisher = partial<Publisher>({
      putRecord: async (collection: string, rkey: string, record: Record<string, unknown>) => {
        written.push({ collection, rkey, record });
        return { uri: `at://did:plc:runner/${collection}/${rkey}`, cid: 'bafyreceipt' };
      },
    });
    const { failed, dispatch } = recording();
    await answerRefusal(publisher, request, refused, times, dispatch);
    expect(written).toHaveLength(1);
    expect(written[0]).toMatchObject({
      collection: 'dev.mainasara.at-run.beta.v2.execution',
      rkey: request.executionId,
      record: { job: JOB, outcome: 'failed', failure: { kind: 'validation', ...refused }, callerDid: DID },
    });
    expect(failed).toEqual([
      {
        reason: 'validation',
        ...refused,
        receipt: {
          uri: `at://did:plc:runner/dev.mainasara.at-run.beta.v2.execution/${request.executionId}`,
          cid: 'bafyreceipt',
        },
      },
    ]);
  });

  it('records the failure with why the receipt could not be written, when the PDS refuses it', async () => {
    const publisher = partial<Publisher>({
      putRecord: async () => {
        throw new AtprotoError('PDS_UNREACHABLE', 'the PDS did not answer');
      },
    });
    const { failed, dispatch } = recording();
    await answerRefusal(publisher, request, refused, times, dispatch);
    expect(failed).toEqual([
      {
        reason: 'validation',
        ...refused,
        receiptError: { code: 'PDS_UNREACHABLE', message: 'the PDS did not answer' },
      },
    ]);
  });

  it('records the failure alone when this runner writes no receipts', async () => {
    const { failed, dispatch } = recording();
    await answerRefusal(undefined, request, refused, times, dispatch);
    expect(failed).toEqual([{ reason: 'validation', ...refused }]);
  });

  it('answers a job that failed before it ran with a receipt of the step it failed at, and leaves anything else alone', async () => {
    const records: Record<string, unknown>[] = [];
    const publisher = partial<Publisher>({
      putRecord: async (_c: string, rkey: string, record: Record<string, unknown>) => {
        records.push(record);
        return { uri: `at://did:plc:runner/x/${rkey}`, cid: 'bafyreceipt' };
      },
    });
    const failed: FailedData = { reason: 'resolution', code: 'RECORD_CID_MISMATCH', message: 'another version' };
    expect(await withJobReceipt(publisher, request, failed, times)).toMatchObject({
      ...failed,
      receipt: { cid: 'bafyreceipt' },
    });
    expect(records[0]).toMatchObject({ failure: { kind: 'resolution', code: 'RECORD_CID_MISMATCH' } });
    // Not a job, no receipts here, or a receipt already written by the invocation: as it was.
    const { job: _job, ...notAJob } = request;
    expect(await withJobReceipt(publisher, notAJob, failed, times)).toBe(failed);
    expect(await withJobReceipt(undefined, request, failed, times)).toBe(failed);
    const named = { ...failed, receipt: { uri: 'at://did:plc:runner/x/y', cid: 'bafyother' } };
    expect(await withJobReceipt(publisher, request, named, times)).toBe(named);
    expect(records).toHaveLength(1);
  });
});
