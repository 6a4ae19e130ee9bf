import { Injectable, Module } from '@nestjs/common';
import { lookup } from 'node:dns/promises';

export interface ResolvedAddress {
  address: string;
  family: number;
}

/**
 * Looks up a host name's addresses for the webhooks (an endpoint's
 * registration, each delivery): the system's resolver (getaddrinfo: the hosts
 * file, then DNS, as the OS is configured), every address in its order. It
 * cannot be cancelled: its callers bound it with a signal and abandon it
 * (resolvedAddresses), and an abandoned lookup still holds one of libuv's
 * threads (UV_THREADPOOL_SIZE, 4 by default, shared with fs and crypto) until
 * the system's resolver gives up (its timeout and attempts, resolv.conf).
 * So a host has at most one lookup at a time: a call while the host's lookup
 * is running joins it (its answer, or its error, is every caller's; each
 * caller still abandons only its own wait), and a host whose lookups hang
 * holds one thread, not one per delivery. Nothing is kept once it answers: the
 * next call looks the host up again, so an attempt's addresses (which its
 * connection is pinned to, WebhookAgents) come from a lookup that answered
 * after the attempt asked. Keyed by the host alone, as a lookup has no
 * options: every address, of either family, in the resolver's order. A
 * provider, so that a test can answer for it (Nest's `overrideProvider`):
 * `systemLookup` is the lookup itself, e.g. one that never answers.
 */
@Injectable()
export class HostResolver {
  /** The lookups running, by host. */
  private readonly running = new Map<string, Promise<ResolvedAddress[]>>();

  lookup(host: string): Promise<ResolvedAddress[]> {
    let answer = this.running.get(host);
    if (!answer) {
      const done = () => this.running.delete(host);
      answer = this.systemLookup(host).finally(done);
      this.running.set(host, answer);
    }
    return answer;
  }

  /** One lookup of `host` (lookup shares it among its callers). */
  protected systemLookup(host: string): Promise<ResolvedAddress[]> {
    return lookup(host, { all: true, verbatim: true });
  }
}

@Module({ providers: [HostResolver], exports: [HostResolver] })
export class HostResolverModule {}
