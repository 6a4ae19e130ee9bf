import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import type { AppConfig } from '../config/config';

/**
 * How many connections the HTTP server holds open in total. Every open
 * connection is a file descriptor and some memory; so is every socket the
 * process opens itself (its database pools, the health check's ping, the card
 * network, the log). Without a cap, clients that open connections and never
 * finish a request take every descriptor (the database, the health check and
 * the card network can then open none) or every byte of the container's memory.
 *
 * `total` is the smaller of two caps:
 * - by descriptors: the process's descriptor limit less what it keeps for its
 *   own sockets (RESERVED_DESCRIPTORS plus its database pools and charge slots);
 * - by memory: half the memory the process may use (its container's limit, else
 *   the machine's) over what one connection may hold (PER_CONNECTION_BYTES). The
 *   other half is the app's: its heap and caches, its pools, Node itself.
 *
 * Who gets the connections under the cap (the fairest share per address, idle
 * connections closed first): connection-fairness.ts.
 */
export interface ConnectionLimits {
  total: number;
  /** The descriptor limit read (RLIMIT_NOFILE) and the cap it gives. */
  descriptors: number;
  byDescriptors: number;
  /** The memory limit read (bytes), what one connection is allowed, and the cap they give. */
  memoryBytes: number;
  perConnectionBytes: number;
  byMemory: number;
}

/** Descriptors kept for the process itself beyond its pools: the log, the ping, webhook deliveries, Node's own. */
export const RESERVED_DESCRIPTORS = 256;
/** The descriptor limit assumed where the process cannot read its own (the usual default soft limit). */
const FALLBACK_DESCRIPTOR_LIMIT = 1024;
const MIN_TOTAL = 32;
/**
 * What a connection holds besides its request body, beyond any one request's
 * due: its headers (Node refuses more than 16 KiB), the socket, the HTTP parser,
 * the request and reply objects (a few KiB each), the kernel's buffers of a
 * connection that trickles (sized to what it sends: a few KiB each way) and an
 * answer being written (problem+json or a page of a list: tens of KiB). 64 KiB
 * covers these with room; a body is counted on top (perConnectionBytes).
 */
const PER_CONNECTION_OVERHEAD = 64 * 1024;

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

/**
 * The memory the process may use: its container's limit (cgroup, which
 * `process.constrainedMemory()` reads; an unconstrained process gets 0 or a
 * number past the machine's memory) or the machine's. The heap limit is not the
 * bound: request bodies are Buffers, outside the V8 heap, and the kernel's
 * socket buffers are charged to the container.
 */
export function memoryLimit(constrained = process.constrainedMemory(), machine = totalmem()): number {
  return constrained > 0 && constrained < machine ? constrained : machine;
}

/**
 * What one connection may hold: a request body half sent is read into a buffer
 * that doubles as it fills (readBody), so up to twice the largest body a route
 * takes (HTTP_BODY_LIMIT; the webhook's own limit is smaller), plus
 * PER_CONNECTION_OVERHEAD.
 */
export function perConnectionBytes(config: AppConfig): number {
  return 2 * config.bodyLimitBytes + PER_CONNECTION_OVERHEAD;
}

/** The cap (see ConnectionLimits) for a process allowed `descriptors` open files and `memoryBytes` of memory. */
export function connectionLimits(config: AppConfig, descriptors = descriptorLimit(), memoryBytes = memoryLimit()): ConnectionLimits {
  const { poolSize, replicaUrls } = config.database;
  const ownSockets = RESERVED_DESCRIPTORS + poolSize * (1 + replicaUrls.length) + config.idempotency.postgres.claimPoolSize + config.payments.concurrency;
  const byDescriptors = Math.max(MIN_TOTAL, descriptors - ownSockets);
  const perConnection = perConnectionBytes(config);
  const byMemory = Math.max(MIN_TOTAL, Math.floor(memoryBytes / 2 / perConnection));
  return { total: Math.min(byDescriptors, byMemory), descriptors, byDescriptors, memoryBytes, perConnectionBytes: perConnection, byMemory };
}

/** The boot log's line: the cap and how it was derived. */
export function describeLimits(limits: ConnectionLimits): string {
  const mib = (bytes: number) => `${Math.round(bytes / 2 ** 20).toLocaleString('en')} MiB`;
  const kib = (bytes: number) => `${Math.round(bytes / 1024).toLocaleString('en')} KiB`;
  const n = (value: number) => value.toLocaleString('en');
  return (
    `at most ${n(limits.total)} connections open: the smaller of ${n(limits.byDescriptors)} by descriptors ` +
    `(${n(limits.descriptors)} open files less ${n(limits.descriptors - limits.byDescriptors)} kept for the process's own sockets) ` +
    `and ${n(limits.byMemory)} by memory (half of ${mib(limits.memoryBytes)} at ${kib(limits.perConnectionBytes)} a connection)`
  );
}
