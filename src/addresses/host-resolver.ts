import { Injectable, Module, OnModuleDestroy } from '@nestjs/common';
import { Resolver } from 'node:dns/promises';

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** How long a DNS query waits for its server's answer before it asks again (then gives up). */
const QUERY_TIMEOUT_MS = 2_000;

/** Names under `localhost` (RFC 6761): loopback, answered without asking DNS. */
const LOCALHOST = /^(?:.+\.)?localhost\.?$/i;
const LOOPBACK: ResolvedAddress[] = [
  { address: '::1', family: 6 },
  { address: '127.0.0.1', family: 4 },
];

/**
 * Looks up a host name's addresses for the webhooks (an endpoint's
 * registration, each delivery) by asking DNS, the system's servers
 * (resolv.conf), for its AAAA and A records at once (node's `Resolver`,
 * c-ares): IPv6 addresses first, then IPv4. A query runs on the event loop,
 * not on one of libuv's threads (the system's getaddrinfo, `dns.lookup`, holds
 * one of UV_THREADPOOL_SIZE, 4 by default and shared with fs and crypto, until
 * the system's resolver gives up): a name whose servers never answer costs a
 * socket and a timer, and no endpoint's lookups can take the threads every
 * other lookup, file read or hash needs. Each query gives up after
 * QUERY_TIMEOUT_MS, twice; its callers give up sooner, at their own deadline
 * (resolvedAddresses). The hosts file is not read: an endpoint is a public
 * address, and names under `localhost` are loopback (RFC 6761).
 *
 * A host has at most one lookup at a time: a call while the host's lookup is
 * running joins it (its answer, or its error, is every caller's; each caller
 * still abandons only its own wait). Nothing is kept once it answers: the
 * next call looks the host up again, so an attempt's addresses (which its
 * connection is pinned to, WebhookAgents) come from a lookup that answered
 * after the attempt asked. A provider, so that a test can answer for it
 * (Nest's `overrideProvider`): `systemLookup` is the lookup itself, and
 * `dnsResolver` the resolver it asks (e.g. of a server that never answers).
 * An app that closes abandons the lookups still waiting (they fail with
 * ECANCELLED): no query outlives the app.
 */
@Injectable()
export class HostResolver implements OnModuleDestroy {
  /** The lookups running, by host. */
  private readonly running = new Map<string, Promise<ResolvedAddress[]>>();
  /** The DNS resolver every lookup asks, made at the first (its servers read once, as node's own `dns.resolve*` does). */
  private dns?: Resolver;

  lookup(host: string): Promise<ResolvedAddress[]> {
    let answer = this.running.get(host);
    if (!answer) {
      const done = () => this.running.delete(host);
      answer = this.systemLookup(host).finally(done);
      this.running.set(host, answer);
    }
    return answer;
  }

  onModuleDestroy(): void {
    this.dns?.cancel();
  }

  /**
   * One lookup of `host` (lookup shares it among its callers): its AAAA and
   * A records, either family's absence no error; the A query's error when
   * neither has an address.
   */
  protected async systemLookup(host: string): Promise<ResolvedAddress[]> {
    if (LOCALHOST.test(host)) return LOOPBACK;
    const resolver = (this.dns ??= this.dnsResolver());
    const [v6, v4] = await Promise.allSettled([resolver.resolve6(host), resolver.resolve4(host)]);
    const addresses = [
      ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : []),
      ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []),
    ];
    if (addresses.length === 0 && v4.status === 'rejected') throw v4.reason;
    return addresses;
  }

  /** The resolver the lookups ask: the system's DNS servers, QUERY_TIMEOUT_MS a query, two tries. */
  protected dnsResolver(): Resolver {
    return new Resolver({ timeout: QUERY_TIMEOUT_MS, tries: 2 });
  }
}

@Module({ providers: [HostResolver], exports: [HostResolver] })
export class HostResolverModule {}
