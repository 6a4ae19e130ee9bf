/**
 * The simulator as a process of its own (`npm run card-network`), so the app can
 * be pointed at a remote card network over a real socket, as it would be at
 * Stripe. The single ready line on stdout is what scripts and tests wait for.
 * The secrets (API keys, the webhook signing secret) are configuration, never output.
 */
import { parseDuration } from './duration';
import { startCardNetworkSimulator } from './simulator';

function fail(message: string): never {
  process.stderr.write(`card network simulator: ${message}\n`);
  process.exit(1);
}

function duration(name: string, fallback: string): number {
  try {
    return parseDuration(process.env[name] || fallback);
  } catch (e) {
    return fail(`${name}: ${(e as Error).message}`);
  }
}

/** Both or neither: a URL without its signing secret would send events nobody can verify. */
function webhookTarget(): { url: string; secret: string } | undefined {
  const url = process.env.CARD_NETWORK_WEBHOOK_URL || '';
  const secret = process.env.CARD_NETWORK_WEBHOOK_SECRET || '';
  if (!url) return undefined;
  if (!secret) fail('CARD_NETWORK_WEBHOOK_SECRET: required when CARD_NETWORK_WEBHOOK_URL is set');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return fail(`CARD_NETWORK_WEBHOOK_URL: not a URL: ${url}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') fail(`CARD_NETWORK_WEBHOOK_URL: must be http or https: ${url}`);
  return { url, secret };
}

async function main(): Promise<void> {
  const rawPort = process.env.CARD_NETWORK_PORT || '4242';
  const port = Number(rawPort);
  if (!/^\d+$/.test(rawPort) || port > 65_535) fail(`CARD_NETWORK_PORT: not a port number: ${rawPort}`);
  const host = process.env.CARD_NETWORK_HOST || '127.0.0.1';
  const secrets = (process.env.CARD_NETWORK_SECRET || 'sk_test_simulator_0123456789abcdef')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (secrets.length === 0) fail('CARD_NETWORK_SECRET: no secret key given');
  const delayMs = duration('CARD_NETWORK_DELAY', '50ms');
  const idempotencyTtlMs = duration('CARD_NETWORK_KEY_TTL', '24h');
  if (idempotencyTtlMs === 0) fail('CARD_NETWORK_KEY_TTL: must be more than 0');
  const processingMs = duration('CARD_NETWORK_PROCESSING_DELAY', '1s');
  const webhook = webhookTarget();

  const simulator = await startCardNetworkSimulator({ secrets, delayMs, idempotencyTtlMs, processingMs, webhook, port, host });
  process.stdout.write(`card network simulator listening on ${simulator.url}\n`);

  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    simulator.close().then(
      () => process.exit(0),
      (e: unknown) => fail(`close failed: ${(e as Error).message}`),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e: unknown) => fail((e as Error).message));
