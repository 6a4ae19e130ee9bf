/*
 * The module's internals that some tests cannot do without, in one place. Every
 * other test (but the unit tests of test/unit, each of its own unit) reaches the
 * package only by its names: 'safe-retries' and its subpaths.
 */

/**
 * The PostgreSQL store's provider. The suites that prove they have teeth put a
 * broken store in its place (a naive check-then-insert store, one that reads
 * keys from a replica) with Nest's overrideProvider: the module takes no store
 * from the app, so its provider is the only way in.
 */
export { PostgresIdempotencyStore } from '../../src/stores/postgres/postgres-idempotency.store';

/** What a store that extends the PostgreSQL store is constructed with, and how it reads a stored response back. */
export { IDEMPOTENCY_TX_HOST } from '../../src/config/idempotency.options';
export { decodeResponse } from '../../src/contract/response-cipher';

/** The outbox relay, driven one pass at a time (relayOnce) where a suite needs each step, not a timer; its cap of deliveries per lane. */
export { OutboxRelay, RELAY_GROUP_CAP, RELAY_LANE_CAP, RELAY_SLOTS } from '../../src/outbox/outbox-relay';

/** How the claim pool and the module's sessions pick their server from TypeORM's replication options. */
export { createClaimPool, primaryClientConfig } from '../../src/stores/postgres/claim-pool';
