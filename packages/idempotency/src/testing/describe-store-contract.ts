import { STORE_CONTRACT } from './store-contract';
import { ContractCommitMode, ContractDriver, StoreContractSettings, StoreContractSubject } from './store-contract-subject';

type TestBody = () => Promise<void>;
type Test = (name: string, body: TestBody, timeoutMs?: number) => void;

/** What the kit needs of a test runner: jest's globals have it (and so do vitest's). */
export interface TestRunner {
  describe(name: string, body: () => void): void;
  it: Test & { skip: Test };
  beforeAll(body: TestBody, timeoutMs?: number): void;
  afterAll(body: TestBody, timeoutMs?: number): void;
}

export interface StoreContractOptions extends Partial<StoreContractSettings> {
  /**
   * The optional parts of the contract the store has (`recovery` points,
   * `settlement`: waking waiting duplicates, `oneCommit`: claims held by a
   * unit). Their cases run for these (with `oneCommit`, the core's cases run
   * in that mode too); the store's shape is checked against them. Default: none.
   */
  parts?: { recovery?: boolean; settlement?: boolean; oneCommit?: boolean };
  /** The test runner's functions; by default the globals of the test file that calls (jest's). */
  runner?: TestRunner;
}

const CASE_TIMEOUT_MS = 60_000;

/**
 * Describes the store contract as tests of the calling test file: one test per
 * case of STORE_CONTRACT, on the store `factory` makes (once, before the cases;
 * closed after them). Call it at the top level of a jest file:
 *
 *   describeStoreContract('my store', async () => ({ store: await makeMyStore(), close: () => ... }));
 *
 * Nothing of jest is loaded by the kit: it takes `describe`, `it`,
 * `beforeAll` and `afterAll` from the globals when it is called, or from
 * `options.runner`.
 */
export function describeStoreContract(name: string, factory: () => Promise<StoreContractSubject>, options: StoreContractOptions = {}): void {
  const { describe, it, beforeAll, afterAll } = options.runner ?? globalRunner();
  const settings: StoreContractSettings = { raceSize: options.raceSize ?? 50, shortLeaseMs: options.shortLeaseMs ?? 200 };
  const parts = { recovery: options.parts?.recovery ?? false, settlement: options.parts?.settlement ?? false, oneCommit: options.parts?.oneCommit ?? false };
  const modes: ContractCommitMode[] = parts.oneCommit ? ['durable', 'one'] : ['durable'];
  describe(`idempotency store contract: ${name}`, () => {
    let drivers: Map<ContractCommitMode, ContractDriver> | undefined;
    const subject = (mode: ContractCommitMode = 'durable') => {
      const driver = drivers?.get(mode);
      if (!driver) throw new Error('the store factory failed; see beforeAll');
      return driver;
    };
    beforeAll(async () => {
      const made = await factory();
      drivers = new Map(modes.map((mode) => [mode, new ContractDriver(made, settings, mode)]));
    }, CASE_TIMEOUT_MS);
    afterAll(async () => {
      for (const driver of drivers?.values() ?? []) await driver.releaseAll();
      await drivers?.get('durable')?.subject.close?.();
    }, CASE_TIMEOUT_MS);

    it(`has the optional parts it declares (${describeParts(parts)})`, async () => {
      const { store } = subject();
      for (const part of ['recovery', 'settlement', 'oneCommit'] as const) {
        if (Boolean(store[part]) !== parts[part]) throw new Error(`the store ${store[part] ? 'has' : 'has no'} ${part}, and declares ${parts[part] ? 'it' : 'none'}`);
      }
    });
    for (const mode of modes) {
      for (const contractCase of STORE_CONTRACT) {
        if (!(contractCase.modes ?? ['durable']).includes(mode)) continue;
        const test = contractCase.needs && !parts[contractCase.needs] ? it.skip : it;
        const named = mode === 'durable' ? contractCase.name : `[commit one] ${contractCase.name}`;
        test(named, () => contractCase.run(subject(mode)), CASE_TIMEOUT_MS);
      }
    }
  });
}

function describeParts(parts: { recovery: boolean; settlement: boolean; oneCommit: boolean }): string {
  const has = Object.entries(parts).flatMap(([part, present]) => (present ? [part] : []));
  return has.length ? has.join(', ') : 'none';
}

function globalRunner(): TestRunner {
  const runner = globalThis as unknown as Partial<TestRunner>;
  if (!runner.describe || !runner.it || !runner.beforeAll || !runner.afterAll) {
    throw new Error('describeStoreContract: no describe/it/beforeAll/afterAll globals here; call it from a jest test file or give options.runner');
  }
  return runner as TestRunner;
}
