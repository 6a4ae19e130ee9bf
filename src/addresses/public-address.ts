import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { HostResolver, ResolvedAddress } from './host-resolver';

export type { ResolvedAddress } from './host-resolver';

/**
 * The addresses a webhook may reach in production: public unicast ones only.
 * The special-purpose ranges (private, loopback, shared, link-local,
 * benchmarking, documentation, 6to4 and NAT64 prefixes, segment routing,
 * multicast, reserved, ...) are ipaddr.js's, which follows IANA's
 * special-purpose address registries and is kept by the proxy-address
 * packages of fastify and express: a registry that grows (3fff::/20 in 2024)
 * is a dependency update, not an edit here. An IPv6 address must also be
 * global unicast (2000::/3), the only part of the IPv6 space IANA allocates:
 * the rest is reserved (IPv4-compatible `::a.b.c.d` among it). An IPv4-mapped
 * address (`::ffff:a.b.c.d`) is judged as its IPv4 address.
 */
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3');

/** The endpoint's address is not a public one (production): nothing was sent. */
export class RefusedAddressError extends Error {
  override name = 'RefusedAddressError';
}

/** Whether `address` (an IP literal) is a public unicast address. */
export function isPublicAddress(address: string): boolean {
  if (isIP(address) === 0) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed.range() === 'unicast';
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().range() === 'unicast';
  return v6.range() === 'unicast' && v6.match(GLOBAL_UNICAST);
}

/**
 * Every address `host` (a name or an IP literal, which is its own address)
 * resolves to, in the resolver's order. A lookup that outlives `signal` is
 * abandoned (it ends at its own timeout, HostResolver): the call
 * rejects at once, with the signal's reason (callers that joined the same
 * lookup, HostResolver, still wait for it). A signal already ended looks
 * nothing up.
 */
export async function resolvedAddresses(host: string, resolver: HostResolver, signal?: AbortSignal): Promise<ResolvedAddress[]> {
  const literal = isIP(host);
  if (literal) return [{ address: host, family: literal }];
  signal?.throwIfAborted();
  return await abandonable(resolver.lookup(host), signal);
}

/**
 * Every address `host` resolves to (resolvedAddresses), each of them public;
 * RefusedAddressError when one is not, or when there is none.
 */
export async function publicAddresses(host: string, resolver: HostResolver, signal?: AbortSignal): Promise<ResolvedAddress[]> {
  const addresses = await resolvedAddresses(host, resolver, signal);
  const refused = addresses.find((a) => !isPublicAddress(a.address));
  if (refused) throw new RefusedAddressError(`${host} resolves to ${refused.address}, which is not a public address`);
  if (addresses.length === 0) throw new RefusedAddressError(`${host} resolves to no address`);
  return addresses;
}

function abandonable<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const abandon = () => reject(signal.reason as Error);
    signal.addEventListener('abort', abandon, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', abandon));
  });
}
