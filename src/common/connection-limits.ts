import { readFileSync } from 'node:fs';
import { BlockList, type Server, type Socket, isIPv4 } from 'node:net';
import type { AppConfig } from '../config/config';
import { addressKey } from './client-address';

/**
 * How many connections the HTTP server holds open: in total, and from one
 * address. Every open connection is a file descriptor, and so is every socket
 * the process opens itself (its database pools, the health check's ping, the
 * card network, the log). Without a cap, clients that open connections and
 * never finish a request take every descriptor: the database, the health
 * check and the card network can then open none.
 *
 * - `total` is the process's descriptor limit less what it keeps for its own
 *   sockets (RESERVED_DESCRIPTORS plus its database pools and charge slots).
 *   Past it the server closes a new connection at once (Node's
 *   `server.maxConnections`); the connections it has are served.
 * - `perAddress` is a sixteenth of `total`: one address (an IPv6 client by its
 *   /64) cannot fill the server alone. Past it, a new connection from that
 *   address is closed at once.
 *
 * Behind HTTP_TRUST_PROXY the proxies' connections carry many clients, whose
 * addresses are known only from each request's X-Forwarded-For, after the
 * headers: a connection from a trusted proxy counts toward `total` only, and
 * the proxy caps its own clients' connections (nginx `limit_conn`, HAProxy
 * `maxconn`, a cloud balancer's own limits). Other peers are capped per address.
 *
 * A connection that does not deliver its request's headers and body within
 * the request timeout (30 s) is answered 408 and closed (createHttpAdapter), so a
 * held connection frees itself.
 */
export interface ConnectionLimits {
  total: number;
  perAddress: number;
}

/** Descriptors kept for the process itself beyond its pools: the log, the ping, webhook deliveries, Node's own. */
export const RESERVED_DESCRIPTORS = 256;
/** The descriptor limit assumed where the process cannot read its own (the usual default soft limit). */
const FALLBACK_DESCRIPTOR_LIMIT = 1024;
const MIN_PER_ADDRESS = 8;

/**
 * The process's limit of open files (RLIMIT_NOFILE), from /proc/self/limits
 * (Linux, proc(5)); Node has no API for it. Node raises the soft limit to the
 * hard one at startup, so the soft limit read is the one in force.
 */
export function descriptorLimit(limitsFile = '/proc/self/limits'): number {
  try {
    const line = readFileSync(limitsFile, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = Number(line?.split(/\s{2,}/)[1]);
    return Number.isSafeInteger(soft) && soft > 0 ? soft : FALLBACK_DESCRIPTOR_LIMIT;
  } catch {
    return FALLBACK_DESCRIPTOR_LIMIT;
  }
}

/** The caps (see ConnectionLimits) for a process allowed `descriptors` open files. */
export function connectionLimits(config: AppConfig, descriptors = descriptorLimit()): ConnectionLimits {
  const { poolSize, replicaUrls } = config.database;
  const ownSockets = RESERVED_DESCRIPTORS + poolSize * (1 + replicaUrls.length) + config.idempotency.claimPoolSize + config.payments.concurrency;
  const total = Math.max(MIN_PER_ADDRESS * 4, descriptors - ownSockets);
  return { total, perAddress: Math.max(MIN_PER_ADDRESS, Math.floor(total / 16)) };
}

/**
 * Applies `limits` to `server`: `maxConnections` for the total, and a count of
 * open connections per address (addressKey) that closes one over the cap as
 * soon as it is accepted, before any byte is read. Peers in `trustedProxies`
 * (HTTP_TRUST_PROXY's addresses and CIDRs) are not counted per address.
 */
export function limitConnections(server: Server, limits: ConnectionLimits, trustedProxies: readonly string[]): void {
  server.maxConnections = limits.total;
  const proxies = blockListOf(trustedProxies);
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    if (address === undefined) return;
    const key = addressKey(address);
    if (proxies !== undefined && isTrusted(proxies, address, key)) return;
    const count = open.get(key) ?? 0;
    if (count >= limits.perAddress) {
      socket.destroy();
      return;
    }
    open.set(key, count + 1);
    socket.once('close', () => {
      const left = (open.get(key) ?? 1) - 1;
      if (left === 0) open.delete(key);
      else open.set(key, left);
    });
  });
}

function blockListOf(entries: readonly string[]): BlockList | undefined {
  if (entries.length === 0) return undefined;
  const list = new BlockList();
  for (const entry of entries) {
    const [address, prefix] = entry.split('/');
    const type = isIPv4(address) ? 'ipv4' : 'ipv6';
    if (prefix === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(prefix), type);
  }
  return list;
}

/** Whether a peer is a trusted proxy; `key` is its addressKey (an IPv4-mapped address as IPv4). */
function isTrusted(proxies: BlockList, address: string, key: string): boolean {
  return isIPv4(key) ? proxies.check(key, 'ipv4') : proxies.check(address.split('%')[0], 'ipv6');
}
