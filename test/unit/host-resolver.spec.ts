import { HostResolver, ResolvedAddress } from '../../src/addresses/host-resolver';
import { resolvedAddresses } from '../../src/addresses/public-address';

/** Each system lookup started, in order: its host and how to answer it. */
const mockStarted: { host: string; answer: (addresses: ResolvedAddress[]) => void; fail: (error: Error) => void }[] = [];

/** The system's lookup (node:dns/promises), replaced by one that answers only on command. */
jest.mock('node:dns/promises', () => ({
  lookup: (host: string) => new Promise((answer, fail) => mockStarted.push({ host, answer, fail })),
}));

/** Whether `promise` has settled (once the callbacks already due have run). */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

const ADDRESSES = [{ address: '93.184.215.14', family: 4 }];
const hosts = () => mockStarted.map((s) => s.host);

/**
 * A host has at most one system lookup at a time (a hung one holds one of
 * libuv's threads until the system's resolver gives up): concurrent callers
 * join it, each abandoning only its own wait, and nothing is kept once it
 * answers.
 */
describe('HostResolver: one lookup per host at a time', () => {
  let resolver: HostResolver;
  beforeEach(() => {
    mockStarted.length = 0;
    resolver = new HostResolver();
  });

  it("four concurrent lookups of a hung host start one lookup; one caller's abort leaves the others waiting, and they get its answer", async () => {
    const deadlines = [0, 1, 2, 3].map(() => new AbortController());
    const waits = deadlines.map((d) => resolvedAddresses('hung.example', resolver, d.signal));
    expect(hosts()).toEqual(['hung.example']);

    const reason = new Error("the attempt's deadline");
    deadlines[0].abort(reason);
    await expect(waits[0]).rejects.toBe(reason);
    for (const wait of waits.slice(1)) expect(await settled(wait)).toBe(false);

    mockStarted[0].answer(ADDRESSES);
    for (const wait of waits.slice(1)) await expect(wait).resolves.toEqual(ADDRESSES);
    expect(hosts()).toEqual(['hung.example']);
  });

  it('a lookup after the answer starts a new one: nothing is kept', async () => {
    const first = resolver.lookup('fresh.example');
    mockStarted[0].answer(ADDRESSES);
    await expect(first).resolves.toEqual(ADDRESSES);

    const second = resolver.lookup('fresh.example');
    expect(hosts()).toEqual(['fresh.example', 'fresh.example']);
    const moved = [{ address: '93.184.215.15', family: 4 }];
    mockStarted[1].answer(moved);
    await expect(second).resolves.toEqual(moved);
  });

  it('a failed lookup fails every caller that joined it, and the next call looks again', async () => {
    const joined = [resolver.lookup('gone.example'), resolver.lookup('gone.example')];
    expect(hosts()).toEqual(['gone.example']);
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND gone.example'), { code: 'ENOTFOUND' });
    mockStarted[0].fail(notFound);
    for (const wait of joined) await expect(wait).rejects.toBe(notFound);

    void resolver.lookup('gone.example');
    expect(hosts()).toEqual(['gone.example', 'gone.example']);
  });

  it("different hosts don't share a lookup", async () => {
    const a = resolver.lookup('a.example');
    const b = resolver.lookup('b.example');
    expect(hosts()).toEqual(['a.example', 'b.example']);
    mockStarted[1].answer(ADDRESSES);
    await expect(b).resolves.toEqual(ADDRESSES);
    expect(await settled(a)).toBe(false);
  });

  it('an attempt whose deadline has already passed looks nothing up', async () => {
    const reason = new Error('lease ended');
    await expect(resolvedAddresses('late.example', resolver, AbortSignal.abort(reason))).rejects.toBe(reason);
    expect(hosts()).toEqual([]);
  });
});
