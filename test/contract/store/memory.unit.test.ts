// The event-store contract on the in-memory store (the one the actor host's unit tests use).
import { MemoryEventStore } from '../../../src/store/memory/event-store.ts';
import { eventStoreContract } from './contract.ts';

eventStoreContract('memory', {
  open: async (options) => new MemoryEventStore(options),
  // It keeps the actors row each append carries, as given.
  actorRows: 'given',
});
