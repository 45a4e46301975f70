// at-run V2 pure validation: records, image references, operator policy, archive limits, path rules, job intake.
export * from './archive-limits.ts';
export * from './safe-path.ts';
export * from './oci-reference.ts';
export * from './record-violations.ts';
export * from './runtime-record.ts';
export * from './code-record.ts';
export * from './operator-policy.ts';
export * from './policy-admission.ts';
export * from './job-record.ts';
export * from './job-rate.ts';
export { isDid, isDatetime, cidIssues } from './record-syntax.ts';
