import { isIPv4, isIPv6 } from 'node:net';

/**
 * Who a per-address budget or log summary counts: an IPv4 address as it is,
 * an IPv6 address by its /64 prefix. One IPv6 subscriber, host or cloud
 * instance is routed a whole /64 (RFC 6177), so counting its single addresses
 * would give it 2^64 budgets. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`)
 * is its IPv4 address.
 */
export function addressKey(address: string): string {
  const groups = ipv6Groups(address);
  if (groups === undefined) return address;
  const mapped = ipv4Mapped(groups);
  if (mapped !== undefined) return mapped;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}

/**
 * Whether a peer's address is in a private range a load balancer or proxy sits
 * in: RFC 1918 (10/8, 172.16/12, 192.168/16), RFC 6598 (100.64/10, used by some
 * clouds' and Kubernetes' networks) or an IPv6 unique local address (fc00::/7).
 * Loopback is not: a proxy on the same host is a deliberate setup.
 */
export function isPrivateAddress(address: string): boolean {
  const groups = ipv6Groups(address);
  const v4 = groups === undefined ? (isIPv4(address) ? address : undefined) : ipv4Mapped(groups);
  if (v4 !== undefined) {
    const [a, b] = v4.split('.').map(Number);
    return a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127);
  }
  return groups !== undefined && (groups[0] & 0xfe00) === 0xfc00;
}

/** The eight 16-bit groups of an IPv6 address (its zone, `%eth0`, left out), or undefined for anything else. */
function ipv6Groups(address: string): number[] | undefined {
  const bare = address.split('%')[0];
  if (!isIPv6(bare)) return undefined;
  let text = bare.toLowerCase();
  // A trailing dotted IPv4 (::ffff:10.0.0.1, 64:ff9b::1.2.3.4) is two groups.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const parse = (part: string | undefined) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const first = parse(head);
  const last = parse(tail);
  const zeros = tail === undefined ? [] : Array<number>(8 - first.length - last.length).fill(0);
  return [...first, ...zeros, ...last];
}

/** The IPv4 address of an IPv4-mapped IPv6 address (::ffff:0:0/96), else undefined. */
function ipv4Mapped(groups: number[]): string | undefined {
  if (!groups.slice(0, 5).every((g) => g === 0) || groups[5] !== 0xffff) return undefined;
  return [groups[6] >> 8, groups[6] & 255, groups[7] >> 8, groups[7] & 255].join('.');
}
