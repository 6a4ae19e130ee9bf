import http from 'node:http';
import https from 'node:https';
import { LookupFunction } from 'node:net';
import { HostResolver } from '../addresses/host-resolver';
import { RefusedAddressError, ResolvedAddress, publicAddresses, resolvedAddresses } from '../addresses/public-address';

/**
 * How long one attempt may take, all told: resolving the host, connecting
 * (TCP and TLS) and the whole answer, under one deadline.
 */
export const ATTEMPT_TIMEOUT_MS = 15_000;
/** The attempt's deadline passed (after `ms`), and where the attempt was then. */
export class AttemptTimeoutError extends Error {
  override name = 'AttemptTimeoutError';
  constructor(
    readonly phase: 'dns' | 'connect' | 'response',
    ms: number,
  ) {
    super(`${phase === 'dns' ? 'no DNS answer' : phase === 'connect' ? 'no connection' : 'no complete answer'} within the attempt's ${ms} ms`);
  }
}

/** How much of an answer's body is kept with the attempt. */
export const EXCERPT_BYTES = 1_024;

export interface WebhookAnswer {
  status: number;
  excerpt: string;
  /** The answer's Retry-After header, as sent. */
  retryAfter?: string;
}

/**
 * POSTs one delivery. The host is resolved first (`resolver`), and the
 * connection goes only to the addresses it answered (its agent's lookup
 * answers them), each in turn (autoSelectFamily: an unreachable IPv6 address,
 * then IPv4). In production every one of them must be public
 * (publicAddresses), so a second resolution cannot swap in another (DNS
 * rebinding). The Host header and TLS's SNI still name the host. Connections
 * are kept alive per endpoint origin, and reused only while the attempt's own
 * resolution names the very addresses they were pinned to (WebhookAgents); a
 * reused connection the receiver had closed sends the request once more, on
 * another. One deadline covers the whole attempt: ATTEMPT_TIMEOUT_MS, or
 * `signal` (the relay's lease) when it ends first. A lookup still running then
 * is abandoned, a connection or an answer still coming is destroyed, and the
 * attempt fails with AttemptTimeoutError, naming where it was ('dns',
 * 'connect', 'response'). Of the answer, the status, its Retry-After and at
 * most EXCERPT_BYTES are kept.
 */
export async function postWebhook(
  url: URL,
  headers: Record<string, string>,
  body: string,
  production: boolean,
  signal: AbortSignal,
  resolver: HostResolver,
): Promise<WebhookAnswer> {
  let phase: AttemptTimeoutError['phase'] = 'dns';
  const started = performance.now();
  const deadline = new AbortController();
  const end = (ms = Math.round(performance.now() - started)) => deadline.abort(new AttemptTimeoutError(phase, ms));
  const timer = setTimeout(() => end(ATTEMPT_TIMEOUT_MS), ATTEMPT_TIMEOUT_MS);
  const leaseEnded = () => end();
  signal.addEventListener('abort', leaseEnded, { once: true });
  if (signal.aborted) end();
  const ends = deadline.signal;
  try {
    if (production && url.protocol !== 'https:') throw new RefusedAddressError(`${url.protocol} is refused in production: https only`);
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const pinned = await (production ? publicAddresses : resolvedAddresses)(host, resolver, ends);
    phase = 'connect';
    return await request(url, headers, body, agents.agent(url, pinned), ends, () => (phase = 'response'), true);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', leaseEnded);
  }
}

/** Idle connections kept per endpoint origin: as many as a relay sends to one endpoint at once (its lane's cap). */
export const IDLE_CONNECTIONS = 4;
/** How long an idle connection is kept: under the 5 s a Node receiver keeps one, so it is rarely closed under a reuse. */
export const IDLE_MS = 4_000;
/** Endpoint origins whose connections are kept; past it, the least recently used origin's go. */
export const KEPT_ORIGINS = 256;

/**
 * Kept-alive connections, an agent per endpoint origin (scheme, host, port)
 * holding at most IDLE_CONNECTIONS idle, each for IDLE_MS. Its
 * connections go only to the addresses pinned when it was made, and it serves
 * a delivery only when that delivery's fresh resolution names the same
 * addresses: a resolution that changed retires it (its idle connections
 * close; it serves no request again, so a busy one of it, once idle, is never
 * reused and closes after IDLE_MS) and makes another. At most KEPT_ORIGINS
 * origins; the least recently used is retired past that.
 */
export class WebhookAgents {
  private readonly kept = new Map<string, { addresses: string; agent: http.Agent }>();

  agent(url: URL, pinned: readonly ResolvedAddress[]): http.Agent {
    const addresses = pinned.map((a) => `${a.family}/${a.address}`).sort().join(' ');
    const found = this.kept.get(url.origin);
    this.kept.delete(url.origin);
    if (found?.addresses === addresses) {
      this.kept.set(url.origin, found);
      return found.agent;
    }
    if (found) retire(found.agent);
    const options: http.AgentOptions = { keepAlive: true, maxFreeSockets: IDLE_CONNECTIONS, timeout: IDLE_MS };
    const pinning = { lookup: pinnedLookup(pinned), autoSelectFamily: true };
    const agent = url.protocol === 'https:' ? new https.Agent({ ...options, ...pinning }) : new http.Agent({ ...options, ...pinning });
    this.kept.set(url.origin, { addresses, agent });
    if (this.kept.size > KEPT_ORIGINS) {
      const [oldest] = this.kept.keys();
      retire(this.kept.get(oldest)!.agent);
      this.kept.delete(oldest);
    }
    return agent;
  }
}

/** The agent's idle connections close (it is out of WebhookAgents: it gets no request again). */
function retire(agent: http.Agent): void {
  for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}

const agents = new WebhookAgents();

/**
 * The request itself, ended by `ends` (its reason is the error); `connected`
 * is called once the connection is up. With `again`, a kept-alive connection
 * that fails before any answer (the receiver had closed it) sends it once more.
 */
function request(
  url: URL,
  headers: Record<string, string>,
  body: string,
  agent: http.Agent,
  ends: AbortSignal,
  connected: () => void,
  again: boolean,
): Promise<WebhookAnswer> {
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise<WebhookAnswer>((resolve, reject) => {
    ends.throwIfAborted();
    const req = transport.request(url, {
      method: 'POST',
      agent,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
    });
    const end = () => req.destroy(ends.reason as Error);
    ends.addEventListener('abort', end, { once: true });
    const settled = () => ends.removeEventListener('abort', end);
    req.on('socket', (socket) => {
      if (req.reusedSocket) connected();
      else socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', connected);
    });
    let answered = false;
    req.on('error', (error: NodeJS.ErrnoException) => {
      settled();
      const stale = again && req.reusedSocket && !answered && !ends.aborted && (error.code === 'ECONNRESET' || error.code === 'EPIPE');
      if (stale) resolve(request(url, headers, body, agent, ends, connected, false));
      else reject(error);
    });
    req.on('response', (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      let kept = 0;
      const done = () => {
        settled();
        resolve({ status: res.statusCode ?? 0, excerpt: Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8'), retryAfter: res.headers['retry-after'] });
      };
      res.on('data', (chunk: Buffer) => {
        if (kept < EXCERPT_BYTES) chunks.push(chunk);
        kept += chunk.length;
        // Enough kept: the rest is not read.
        if (kept >= EXCERPT_BYTES) {
          done();
          res.destroy();
        }
      });
      res.on('end', done);
      res.on('error', done);
    });
    req.end(body);
  });
}

/** A lookup that answers the checked addresses, in either form Node asks for. */
export function pinnedLookup(pinned: readonly ResolvedAddress[]): LookupFunction {
  return (_host, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as unknown as (error: null, addresses: ResolvedAddress[]) => void)(null, [...pinned]);
    else callback(null, pinned[0].address, pinned[0].family);
  };
}
