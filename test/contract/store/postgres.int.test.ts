// The event-store contract on PostgreSQL, against the real server (`npm run setup`); a schema per test. The port's
// PostgreSQL implementation is PgHostStore: as a store holding the whole log opens it, and as a cluster node's
// supervisor does (leases, ended actors' events paged out of memory, request streams' oldest too). Either way it
// folds the actors projection itself (registered, as open-log.ts registers it): its rows are folded, not given.
import { afterAll, beforeAll } from 'vitest';
import { isRequestStream } from '../../../src/supervisor/cluster/request-streams.ts';
import { PgHostStore, type PgHostStoreOptions } from '../../../src/store/postgres/host-store.ts';
import { actorsProjection, ACTORS_PROJECTION } from '../../../src/supervisor/host/actors-projection.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';
import { eventStoreContract, type ContractHarness } from './contract.ts';

let url = '';
beforeAll(async () => {
  url = await requirePostgres();
});
afterAll(async () => {
  if (url) await dropSchemas(url);
});

const schemas = new WeakMap<object, string>();

function harness(extra: Omit<PgHostStoreOptions, 'url'>): ContractHarness {
  const open = async (
    options: Parameters<ContractHarness['open']>[0],
    schema: string,
    node?: string,
  ): Promise<PgHostStore> => {
    const projections = [...(options.projections ?? []), actorsProjection()];
    const store = await PgHostStore.open({
      ...extra,
      ...options,
      projections,
      actorRows: { projection: ACTORS_PROJECTION },
      url,
      schema,
      ...(extra.node && node ? { node: { ...extra.node, name: node } } : {}),
    });
    schemas.set(store, schema);
    return store;
  };
  return {
    open: (options) => open(options, testSchema()),
    // Another pool on the same schema: what a second supervisor (another node) or `runlog events --follow` opens.
    second: (first, options) => open({ ...options }, schemas.get(first)!, 'contract-second'),
    actorRows: 'folded',
  };
}

eventStoreContract('postgres', harness({}));
eventStoreContract(
  'postgres, a cluster node',
  harness({
    node: { name: 'contract', leaseTtlMs: 15_000 },
    pageOut: { keepRecent: 0, requestStreams: { is: isRequestStream } },
  }),
);
