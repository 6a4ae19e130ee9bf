import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { BlockList, type Socket, isIPv4 } from 'node:net';
import { addressKey } from '../addresses/client-address';

/**
 * Who gets the server's connections under its total (connection-limits.ts),
 * so that no set of addresses locks the others out:
 *
 * - Below the total every connection is taken: one address alone (a load
 *   balancer, all its clients behind it) may use them all.
 * - At the total, a new connection takes the place of an unfinished one of
 *   the address holding the most connections, provided it holds more than the
 *   newcomer's address would; else of the newcomer's own address; else the
 *   newcomer is closed at once. Unfinished: idle first (no request in flight:
 *   a keep-alive connection between requests, one whose request's headers
 *   have not all arrived, one that sent nothing), the one idle the longest
 *   first; then one whose request's body is still arriving (no handler has
 *   run for it: a slot, a claim are taken after the body), the oldest request
 *   first. So an address (an IPv6 client by its /64) keeps at least its fair
 *   share, however many addresses flood: a new client gets in at once, in
 *   place of the largest flood's oldest unfinished connection, whether it
 *   trickles its headers, its body, or nothing.
 * - A request whose body has arrived is never cut here: a slow handler is
 *   bounded by the connection timeout, a slow reader by the same.
 *
 * Closing an idle keep-alive connection may cross a request the client is just
 * sending on it: the client sees the connection reset and sends it again (what
 * HTTP clients do for a reused connection, and what a load balancer's idle
 * timeout does anyway).
 *
 * Trusted proxies (HTTP_TRUST_PROXY) are addresses like any other here: their
 * clients are known only from X-Forwarded-For, after the headers, and the proxy
 * caps its own clients (nginx `limit_conn`, HAProxy `maxconn`). They are left
 * out of `largestUntrusted`, the sign of a proxy that is not declared.
 */
export interface ConnectionEvents {
  /** An idle connection was closed to make room for a new one. */
  evicted?(): void;
  /** A new connection was closed at once: every connection it could replace is serving a request. */
  refused?(): void;
  /** `address`, not a trusted proxy, holds `held` of the `open` connections, more than half (on each connection it opens). */
  dominant?(address: string, held: number, open: number): void;
}

export interface ConnectionTable {
  readonly total: number;
  open(): number;
  /** The untrusted address holding the most connections (none when no untrusted peer is connected). */
  largestUntrusted(): { address: string; held: number } | undefined;
}

interface Holder {
  key: string;
  trusted: boolean;
  count: number;
  /** Its connections with no request in flight, the one idle the longest first. */
  idle: Set<Tracked>;
  /** Its connections with a request in flight, the one whose request came first first. */
  busy: Set<Tracked>;
}

interface Tracked {
  socket: Socket;
  holder: Holder;
  /** Its requests in flight (more than one when the client pipelines). */
  requests: Set<IncomingMessage>;
  gone: boolean;
}

/**
 * Connections with a request in flight looked at, per address and newcomer,
 * for one whose body is still arriving. Those found serving a request (its
 * body whole) go to the back of the line, so a server busy with such requests
 * costs little per newcomer, and a slow body behind them is reached soon.
 */
const RECEIVING_SCAN = 32;

export function limitConnections(server: Server, total: number, trustedProxies: readonly string[], events: ConnectionEvents = {}): ConnectionTable {
  const proxies = blockListOf(trustedProxies);
  const holders = new Map<string, Holder>();
  // Holders by how many connections they hold, to find the largest without a scan of all.
  const byCount = new Map<number, Set<Holder>>();
  const tracked = new WeakMap<Socket, Tracked>();
  let open = 0;
  let largest = 0;

  const move = (holder: Holder, count: number) => {
    const from = byCount.get(holder.count);
    from?.delete(holder);
    if (from?.size === 0) byCount.delete(holder.count);
    holder.count = count;
    if (count === 0) {
      holders.delete(holder.key);
    } else {
      const to = byCount.get(count) ?? new Set<Holder>();
      byCount.set(count, to.add(holder));
    }
    if (count > largest) largest = count;
    while (largest > 0 && !byCount.has(largest)) largest--;
  };

  const forget = (t: Tracked) => {
    if (t.gone) return;
    t.gone = true;
    t.holder.idle.delete(t);
    t.holder.busy.delete(t);
    open--;
    move(t.holder, t.holder.count - 1);
  };

  /**
   * The connection a newcomer from `holder` takes the place of (see above), if
   * any: of a larger address, an idle one, else one still receiving its
   * request's body (nothing has run for it yet); else the same of its own.
   */
  const victim = (holder: Holder): Tracked | undefined => {
    for (const pick of [oldestIdle, oldestReceiving]) {
      for (let count = largest; count > holder.count + 1; count--) {
        for (const other of byCount.get(count) ?? []) {
          const found = pick(other);
          if (found) return found;
        }
      }
    }
    return oldestIdle(holder) ?? oldestReceiving(holder);
  };

  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    if (address === undefined) return;
    const key = addressKey(address);
    let holder = holders.get(key);
    if (holder === undefined) {
      holder = { key, trusted: proxies !== undefined && isTrusted(proxies, address, key), count: 0, idle: new Set(), busy: new Set() };
      holders.set(key, holder);
    }
    if (open >= total) {
      const replaced = victim(holder);
      if (replaced === undefined) {
        if (holder.count === 0) holders.delete(key);
        socket.destroy();
        events.refused?.();
        return;
      }
      forget(replaced);
      replaced.socket.destroy();
      events.evicted?.();
      // The newcomer's own address may have given its last connection: it holds the newcomer now.
      holders.set(key, holder);
    }
    const t: Tracked = { socket, holder, requests: new Set(), gone: false };
    tracked.set(socket, t);
    holder.idle.add(t);
    open++;
    move(holder, holder.count + 1);
    socket.once('close', () => forget(t));
    if (!holder.trusted && holder.count * 2 > open) events.dominant?.(key, holder.count, open);
  });

  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const t = tracked.get(request.socket);
    if (t === undefined) return;
    if (t.requests.size === 0) {
      t.holder.idle.delete(t);
      t.holder.busy.add(t);
    }
    t.requests.add(request);
    response.once('close', () => {
      t.requests.delete(request);
      if (t.requests.size > 0 || t.gone) return;
      // Back among the idle, as the newest.
      t.holder.busy.delete(t);
      t.holder.idle.add(t);
    });
  });

  return {
    total,
    open: () => open,
    largestUntrusted: () => {
      let found: Holder | undefined;
      for (const holder of holders.values()) if (!holder.trusted && holder.count > (found?.count ?? 0)) found = holder;
      return found && { address: found.key, held: found.count };
    },
  };
}

function oldestIdle(holder: Holder): Tracked | undefined {
  return holder.idle.values().next().value;
}

/**
 * A connection whose requests in flight are all still arriving (`complete`:
 * Node has not parsed the whole message): no handler runs for it, the body
 * is read before any route's work (a slot, a claim) starts.
 */
function oldestReceiving(holder: Holder): Tracked | undefined {
  const serving: Tracked[] = [];
  let found: Tracked | undefined;
  for (const t of holder.busy) {
    if (serving.length === RECEIVING_SCAN) break;
    if ([...t.requests].every((request) => !request.complete)) {
      found = t;
      break;
    }
    serving.push(t);
  }
  for (const t of serving) {
    holder.busy.delete(t);
    holder.busy.add(t);
  }
  return found;
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
