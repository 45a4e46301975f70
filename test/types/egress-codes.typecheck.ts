// Type-level test, checked by `npm run typecheck`: every code the egress proxy answers with is a code of the one
// table (src/domain/error-codes.ts), though the proxy lists them itself (it imports nothing outside its folder and
// the egress domain files: docs/decisions/0012).
import type { ErrorCode } from '../../src/domain/error-codes.ts';
import { EGRESS_CONTROL_CODES, EGRESS_REFUSAL_CODES } from '../../src/domain/at-run/egress-codes.ts';

export const refusals: readonly ErrorCode[] = EGRESS_REFUSAL_CODES;
export const control: readonly ErrorCode[] = EGRESS_CONTROL_CODES;
