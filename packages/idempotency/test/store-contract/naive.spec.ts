import { ContractCommitMode, ContractDriver, STORE_CONTRACT, StoreContractSubject } from 'safe-retries/testing';
import { NaiveIdempotencyStore } from '../support/naive-idempotency.store';
import { postgresStoreSubject } from '../support/store-apps';

/**
 * The contract has teeth: a deliberately naive store (check, then insert; an
 * unfenced completion; no takeover; one-commit claims that check without a
 * lock) passes its sequential cases and fails the race, in both modes, and the
 * fencing, as such code does in production.
 */
describe('the store contract against a naive check-then-insert store', () => {
  let subject: StoreContractSubject;
  beforeAll(async () => {
    subject = await postgresStoreSubject({}, NaiveIdempotencyStore);
  });
  afterAll(() => subject?.close?.());

  const run = (prefix: string, mode: ContractCommitMode = 'durable', raceSize = 50) => {
    const contractCase = STORE_CONTRACT.find((c) => c.name.startsWith(prefix));
    if (!contractCase) throw new Error(`no case ${prefix}`);
    const driver = new ContractDriver(subject, { raceSize, shortLeaseMs: 100 }, mode);
    return contractCase.run(driver).finally(() => driver.releaseAll());
  };

  it('fails the race: two claims inside its window between the check and the write both win', async () => {
    // Two of the 50 find no row and both wait before writing: the double win is certain.
    (subject.store as NaiveIdempotencyStore).holdClaimWindow(2);
    await expect(run('race:')).rejects.toThrow(/one winner of 50 identical claims/);
  });

  it('fails the race with one-commit claims too: claims that each check inside their unit all win', async () => {
    // Fewer than the pool's connections: each winner holds its unit open until the case ends.
    (subject.store as NaiveIdempotencyStore).holdClaimWindow(2);
    await expect(run('race:', 'one', 8)).rejects.toThrow(/one winner of 8 identical claims/);
  });

  it('fails the fencing: an owner past its lease is never taken over', async () => {
    await expect(run('fencing:')).rejects.toThrow(/no takeover within/);
  });

  it.each(['replay:', 'scope:', 'mismatch:', 'in progress:'])('passes the sequential case %s', async (prefix) => {
    await run(prefix);
  });

  it.each(['replay:', 'release:'])('passes the sequential case %s with one-commit claims', async (prefix) => {
    await run(prefix, 'one');
  });
});
