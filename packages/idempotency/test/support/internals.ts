/*
 * The module's internals that some tests cannot do without, in one place. Every
 * other test (but the unit tests of test/unit, each of its own unit) reaches the
 * package only by its names: 'safe-retries' and its subpaths.
 */

/** The outbox relay, driven one pass at a time (relayOnce) where a suite needs each step, not a timer; its caps of deliveries per lane and per group, and its slots. */
export { OutboxRelay, RELAY_GROUP_CAP, RELAY_LANE_CAP, RELAY_SLOTS } from '../../src/outbox/outbox-relay';
