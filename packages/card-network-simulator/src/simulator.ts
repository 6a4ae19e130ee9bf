/**
 * A card network that speaks a small subset of Stripe's HTTP API, so the payment
 * path can be exercised against a real remote protocol (latency, lost answers,
 * Stripe's own Idempotency-Key rules, webhooks) without the internet. Plain
 * node:http and in-memory state: it starts in milliseconds inside a test and
 * never needs Nest.
 *
 * Why the timing matters: every effect (an intent created, confirmed or canceled,
 * a refund) happens the moment the request arrives, is visible at once through
 * the GET endpoints and emits its event (and webhook) then, while the answer goes
 * out `delayMs` after arrival. A caller that crashes or gives up during the delay
 * therefore leaves "card charged, answer lost", which is the case exactly-once
 * payments must survive: a retry with the same key replays, a GET tells the
 * state, and the webhook tells what the lost answer would have.
 *
 * Where each part lives: router.ts (auth, routing), payment-intents.ts,
 * charges.ts, refunds.ts, tokens.ts, events.ts (the resources),
 * payment-methods.ts (the test cards' behaviour), idempotency.ts (keys, hold,
 * delayed answers), control.ts and faults.ts (fault injection), webhooks.ts and
 * webhook-dispatcher.ts (delivery), network.ts (the state they share).
 */
import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { ApiError, invalid, randomId } from './api';
import { Network } from './network';
import { sendError, sendJson } from './reply';
import { route } from './router';
import { WebhookOptions, WebhookTarget } from './webhooks';

export interface SimulatorOptions {
  /** Accepted secret keys (Bearer, or HTTP Basic username); each one is an account of its own. */
  secrets: string[];
  /** Latency: the answer goes out this long after the request arrived. */
  delayMs: number;
  /** How long a saved Idempotency-Key result is kept (every POST); default 24h. */
  idempotencyTtlMs?: number;
  /** How long a `processing` intent (pm_card_chargeProcessing) takes to succeed, and a late refund (pm_card_refund*) to settle; default 1 s. */
  processingMs?: number;
  /** Where events are delivered; also settable after start with setWebhook. */
  webhook?: WebhookOptions;
}

export interface RunningSimulator {
  url: string;
  port: number;
  /** Points webhook delivery at an endpoint (from the next attempt on), or stops it with null. */
  setWebhook(target: WebhookTarget | null): void;
  close(): Promise<void>;
}

const DEFAULT_TTL_MS = 24 * 3_600_000;
const DEFAULT_PROCESSING_MS = 1_000;
const MAX_BODY_BYTES = 1 << 20;

/** The options checked, with their defaults; a RangeError for a setting the network cannot run with. */
function checkOptions(options: SimulatorOptions): Network['settings'] {
  const delayMs = options.delayMs;
  const ttlMs = options.idempotencyTtlMs ?? DEFAULT_TTL_MS;
  const processingMs = options.processingMs ?? DEFAULT_PROCESSING_MS;
  if (!Number.isFinite(delayMs) || delayMs < 0) throw new RangeError('delayMs must be a non-negative number');
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError('idempotencyTtlMs must be a positive number');
  if (!Number.isFinite(processingMs) || processingMs < 0) throw new RangeError('processingMs must be a non-negative number');
  if (options.secrets.length === 0 || options.secrets.some((s) => s.length === 0)) {
    throw new RangeError('at least one non-empty secret key is required');
  }
  return { delayMs, ttlMs, processingMs };
}

/** Reads one request's body (at most 1 MiB), then routes it; any error becomes Stripe's error answer. */
function receive(net: Network, req: IncomingMessage, res: ServerResponse): void {
  const arrivedAt = performance.now();
  const requestId = randomId('req_', 14);
  res.setHeader('Request-Id', requestId);
  res.setHeader('Content-Type', 'application/json');
  const header = req.headers['idempotency-key'];
  if (typeof header === 'string' && req.method === 'POST') res.setHeader('Idempotency-Key', header);

  const chunks: Buffer[] = [];
  let size = 0;
  let tooLarge = false;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) tooLarge = true;
    else chunks.push(chunk);
  });
  req.on('error', () => res.destroy());
  req.on('end', () => {
    if (net.closed) return void res.destroy();
    if (tooLarge) {
      res.setHeader('Connection', 'close');
      return sendError(res, invalid('Request body too large.', 'request_too_large', undefined, 413));
    }
    try {
      route(net, req, res, Buffer.concat(chunks).toString('utf8'), arrivedAt, requestId);
    } catch (e) {
      if (e instanceof ApiError) return sendError(res, e);
      sendJson(res, 500, { error: { type: 'api_error', message: `Simulator bug: ${(e as Error).message}` } });
    }
  });
}

export function startCardNetworkSimulator(options: SimulatorOptions & { port?: number; host?: string }): Promise<RunningSimulator> {
  const net = new Network(checkOptions(options), options.secrets, options.webhook);
  const server = createServer((req, res) => receive(net, req, res));

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolveClose) => {
      net.close();
      server.close(() => resolveClose());
      server.closeAllConnections();
    });
    return closing;
  };

  const host = options.host ?? '127.0.0.1';
  return new Promise<RunningSimulator>((resolveStart, reject) => {
    server.once('error', (e) => {
      net.close();
      reject(e);
    });
    server.listen(options.port ?? 0, host, () => {
      const { port } = server.address() as AddressInfo;
      const shownHost = host.includes(':') ? `[${host}]` : host;
      resolveStart({ url: `http://${shownHost}:${port}`, port, setWebhook: (target) => net.webhooks.setTarget(target), close });
    });
  });
}
