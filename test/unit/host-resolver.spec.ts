import { pbkdf2 } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { HostResolver, ResolvedAddress } from '../../src/addresses/host-resolver';
import { resolvedAddresses } from '../../src/addresses/public-address';
import { errorClass } from '../../src/events/webhook-errors';
import { DnsServer } from '../support/dns-server';

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

/** A HostResolver whose lookups answer only on command: each lookup started, in order. */
class CommandedResolver extends HostResolver {
  readonly started: { host: string; answer: (addresses: ResolvedAddress[]) => void; fail: (error: Error) => void }[] = [];

  hosts(): string[] {
    return this.started.map((s) => s.host);
  }

  protected override systemLookup(host: string): Promise<ResolvedAddress[]> {
    return new Promise((answer, fail) => this.started.push({ host, answer, fail }));
  }
}

/**
 * A host has at most one lookup at a time: concurrent callers join it, each
 * abandoning only its own wait, and nothing is kept once it answers.
 */
describe('HostResolver: one lookup per host at a time', () => {
  let resolver: CommandedResolver;
  beforeEach(() => {
    resolver = new CommandedResolver();
  });

  it("four concurrent lookups of a hung host start one lookup; one caller's abort leaves the others waiting, and they get its answer", async () => {
    const deadlines = [0, 1, 2, 3].map(() => new AbortController());
    const waits = deadlines.map((d) => resolvedAddresses('hung.example', resolver, d.signal));
    expect(resolver.hosts()).toEqual(['hung.example']);

    const reason = new Error("the attempt's deadline");
    deadlines[0].abort(reason);
    await expect(waits[0]).rejects.toBe(reason);
    for (const wait of waits.slice(1)) expect(await settled(wait)).toBe(false);

    resolver.started[0].answer(ADDRESSES);
    for (const wait of waits.slice(1)) await expect(wait).resolves.toEqual(ADDRESSES);
    expect(resolver.hosts()).toEqual(['hung.example']);
  });

  it('a lookup after the answer starts a new one: nothing is kept', async () => {
    const first = resolver.lookup('fresh.example');
    resolver.started[0].answer(ADDRESSES);
    await expect(first).resolves.toEqual(ADDRESSES);

    const second = resolver.lookup('fresh.example');
    expect(resolver.hosts()).toEqual(['fresh.example', 'fresh.example']);
    const moved = [{ address: '93.184.215.15', family: 4 }];
    resolver.started[1].answer(moved);
    await expect(second).resolves.toEqual(moved);
  });

  it('a failed lookup fails every caller that joined it, and the next call looks again', async () => {
    const joined = [resolver.lookup('gone.example'), resolver.lookup('gone.example')];
    expect(resolver.hosts()).toEqual(['gone.example']);
    const notFound = Object.assign(new Error('queryA ENOTFOUND gone.example'), { code: 'ENOTFOUND' });
    resolver.started[0].fail(notFound);
    for (const wait of joined) await expect(wait).rejects.toBe(notFound);

    void resolver.lookup('gone.example');
    expect(resolver.hosts()).toEqual(['gone.example', 'gone.example']);
  });

  it("different hosts don't share a lookup", async () => {
    const a = resolver.lookup('a.example');
    const b = resolver.lookup('b.example');
    expect(resolver.hosts()).toEqual(['a.example', 'b.example']);
    resolver.started[1].answer(ADDRESSES);
    await expect(b).resolves.toEqual(ADDRESSES);
    expect(await settled(a)).toBe(false);
  });

  it('an attempt whose deadline has already passed looks nothing up', async () => {
    const reason = new Error('lease ended');
    await expect(resolvedAddresses('late.example', resolver, AbortSignal.abort(reason))).rejects.toBe(reason);
    expect(resolver.hosts()).toEqual([]);
  });
});

/** How long the test's resolver waits for a query's answer (one try). */
const QUERY_MS = 300;

/** The HostResolver, asking the test's DNS server instead of the system's. */
class LocalDnsResolver extends HostResolver {
  constructor(private readonly server: DnsServer) {
    super();
  }

  protected override dnsResolver(): Resolver {
    const resolver = new Resolver({ timeout: QUERY_MS, tries: 1 });
    resolver.setServers([this.server.address]);
    return resolver;
  }
}

/** Hashes on libuv's thread pool (pbkdf2 runs there): settles once each has had a thread. */
const poolWork = (n: number) =>
  Promise.all(Array.from({ length: n }, () => new Promise<void>((resolve, reject) => pbkdf2('secret', 'salt', 1_000, 32, 'sha256', (e) => (e ? reject(e) : resolve())))));

describe('HostResolver: DNS queries, on the event loop', () => {
  const server = new DnsServer({
    'both.example': ['2001:db8::10', '93.184.215.14', '2001:db8::11', '93.184.215.15'],
    'v4.example': ['93.184.215.14'],
  });
  let resolver: LocalDnsResolver;
  beforeAll(() => server.start());
  afterAll(() => server.stop());
  beforeEach(() => {
    resolver = new LocalDnsResolver(server);
  });

  it("asks for a name's AAAA and A records: its IPv6 addresses first, then its IPv4 ones", async () => {
    await expect(resolver.lookup('both.example')).resolves.toEqual([
      { address: '2001:db8::10', family: 6 },
      { address: '2001:db8::11', family: 6 },
      { address: '93.184.215.14', family: 4 },
      { address: '93.184.215.15', family: 4 },
    ]);
    await expect(resolver.lookup('v4.example')).resolves.toEqual([{ address: '93.184.215.14', family: 4 }]);
  });

  it('a name DNS does not know fails with its code, of the class dns', async () => {
    const error = await resolver.lookup('unknown.example').catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ENOTFOUND', syscall: 'queryA' });
    expect(errorClass(error)).toBe('dns');
  });

  it('names under localhost are loopback, without a question to DNS (RFC 6761)', async () => {
    const before = server.asked.size;
    await expect(resolver.lookup('localhost')).resolves.toEqual([
      { address: '::1', family: 6 },
      { address: '127.0.0.1', family: 4 },
    ]);
    await expect(resolver.lookup('hooks.LOCALHOST')).resolves.toHaveLength(2);
    expect(server.asked.size).toBe(before);
  });

  it("lookups whose server never answers hold none of libuv's threads, and end at the query's timeout as dns errors", async () => {
    // Twice as many hung names as the pool has threads (UV_THREADPOOL_SIZE, 4 by default).
    const hung = Array.from({ length: 8 }, (_, i) => resolver.lookup(`t${i}.never-answers.test`).catch((e: unknown) => e));
    await poolWork(8);
    for (const lookup of hung) expect(await settled(lookup)).toBe(false);
    expect(server.asked.get('t7.never-answers.test')).toBeGreaterThan(0);

    for (const error of await Promise.all(hung)) {
      expect(error).toMatchObject({ code: 'ETIMEOUT' });
      expect(errorClass(error)).toBe('dns');
    }
  });

  it('an app that closes abandons the lookups still waiting', async () => {
    const hung = resolver.lookup('closing.never-answers.test').catch((e: unknown) => e);
    await poolWork(1);
    expect(await settled(hung)).toBe(false);
    resolver.onModuleDestroy();
    expect(await settled(hung)).toBe(true);
    expect(await hung).toMatchObject({ code: 'ECANCELLED' });
  });
});
