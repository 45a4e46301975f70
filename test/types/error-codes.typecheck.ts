// Type-level tests for the error-code table, checked by `npm run typecheck`: every `@ts-expect-error` below must
// stay an error (a directive that stops being needed fails the typecheck).
import { RunlogError, ValidationError } from '../../src/domain/errors.ts';
import { ERROR_CODES, type CodeOf, type ErrorCategory } from '../../src/domain/error-codes.ts';

// A code in the table compiles.
export const known = new RunlogError('NOT_FOUND', 'x');

// A code that is not in the table does not: add it to ERROR_CODES (with its category) first.
// @ts-expect-error — NOT_IN_THE_TABLE is not an ErrorCode
export const unknown = new RunlogError('NOT_IN_THE_TABLE', 'x');
// @ts-expect-error — the same for every subclass
export const unknownValidation = new ValidationError('ALSO_NOT_IN_THE_TABLE', 'x', []);

// A category that does not exist is refused in the table's type.
// @ts-expect-error — 'maybe' is not a category
export const badCategory: ErrorCategory = 'maybe';

// CodeOf narrows to one category.
export const validationCode: CodeOf<'validation'> = 'INPUT_INVALID';
// @ts-expect-error — NOT_FOUND is not a validation code
export const notValidation: CodeOf<'validation'> = 'NOT_FOUND';

export const table = ERROR_CODES;
