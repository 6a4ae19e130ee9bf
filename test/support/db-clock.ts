/**
 * The database clock in microseconds, as the idempotency store writes and
 * compares the `lease` column (int8 µs since the epoch). Tests that write or
 * judge leases use it so they agree with the store on the clock (PostgreSQL's,
 * never the test process's).
 */
export { NOW_US } from '../../packages/idempotency/test/support/keys-table';
