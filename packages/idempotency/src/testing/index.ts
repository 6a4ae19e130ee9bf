/**
 * `safe-retries/testing`: the store contract and its test kit. A store (or the
 * PostgreSQL store on your database, behind your pooler, with your options)
 * proves it keeps the contract the orchestration relies on:
 *
 *   import { describeStoreContract, idempotencyStoreOf } from 'safe-retries/testing';
 *   describeStoreContract('postgres', async () => {
 *     const app = await NestFactory.createApplicationContext(AppModule);
 *     return { ...idempotencyStoreOf(app), close: () => app.close() };
 *   }, { parts: { recovery: true, settlement: true } });
 *
 * The cases (STORE_CONTRACT) can also be run one by one, e.g. to show that a
 * store that breaks the contract fails a case. IDEMPOTENCY_POSTGRES_STORE is the
 * provider of the module's PostgreSQL store, for a test that puts a store of
 * its own in its place (Nest's overrideProvider): to show that the app's own
 * suites catch a store that breaks the contract.
 */
export { describeStoreContract } from './describe-store-contract';
export type { StoreContractOptions, TestRunner } from './describe-store-contract';
export { STORE_CONTRACT } from './store-contract';
export { ContractDriver } from './store-contract-subject';
export type { ContractCommitMode, StoreContractCase, StoreContractSettings, StoreContractSubject } from './store-contract-subject';
export { idempotencyStoreOf } from './idempotency-store-of';
export { IDEMPOTENCY_POSTGRES_STORE } from '../stores/idempotency-stores';
// The contract itself, for a store of your own (a completion that cannot be
// stored after the work ran throws ResponseNotStoredError; one that is not the
// owner's, LeaseLostError from the root).
export { ResponseNotStoredError } from '../contract/idempotency.errors';
export type {
  ClaimRequest,
  ClaimResult,
  IdempotencyStore,
  KeyOutcome,
  KeySettlement,
  OneCommitKeys,
  Ownership,
  RecoveryPoint,
  RecoveryPoints,
  ScopedKey,
  StoredResponse,
} from '../contract/idempotency.store';
