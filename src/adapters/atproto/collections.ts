// The at-run V2 record families (lexicons/dev.mainasara.at-run.beta.v2.*.json).

export const AT_RUN_V2 = {
  code: 'dev.mainasara.at-run.beta.v2.code',
  runtime: 'dev.mainasara.at-run.beta.v2.runtime',
  alias: 'dev.mainasara.at-run.beta.v2.alias',
  runner: 'dev.mainasara.at-run.beta.v2.runner',
  execution: 'dev.mainasara.at-run.beta.v2.execution',
  job: 'dev.mainasara.at-run.beta.v2.job',
  secrets: 'dev.mainasara.at-run.beta.v2.secrets',
} as const;

export type AtRunV2Collection = (typeof AT_RUN_V2)[keyof typeof AT_RUN_V2];

/** A strong reference to one version of a record (com.atproto.repo.strongRef). */
export interface StrongRef {
  uri: string;
  cid: string;
}
