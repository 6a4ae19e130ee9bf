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
 * threads (UV_THREADPOOL_SIZE, 4 by default) until the system's resolver
 * gives up (its timeout and attempts, resolv.conf). A provider, so that a
 * test can answer for it (Nest's `overrideProvider`), e.g. with a lookup
 * that never answers.
 */
@Injectable()
export class HostResolver {
  lookup(host: string): Promise<ResolvedAddress[]> {
    return lookup(host, { all: true, verbatim: true });
  }
}

@Module({ providers: [HostResolver], exports: [HostResolver] })
export class HostResolverModule {}
