import { parseDuration } from '../config/duration';
import { startCardNetworkSimulator } from './simulator';

/**
 * `npm run card-network`: the simulator as a process of its own, so that its
 * ledger outlives the app (point the app at it with CARD_NETWORK_URL). Its
 * variables are its own, read only here: CARD_NETWORK_PORT (4242),
 * CARD_NETWORK_HOST (127.0.0.1), CARD_NETWORK_SECRET (comma-separated keys,
 * default the documented test key), CARD_NETWORK_DELAY (50ms),
 * CARD_NETWORK_KEY_TTL (24h).
 */
async function main(): Promise<void> {
  const env = process.env;
  const secrets = (env.CARD_NETWORK_SECRET || 'sk_test_simulator_0123456789abcdef')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const simulator = await startCardNetworkSimulator({
    secrets,
    delayMs: parseDuration(env.CARD_NETWORK_DELAY || '50ms'),
    idempotencyTtlMs: parseDuration(env.CARD_NETWORK_KEY_TTL || '24h'),
    port: Number(env.CARD_NETWORK_PORT || 4242),
    host: env.CARD_NETWORK_HOST || '127.0.0.1',
  });
  console.log(`card network simulator listening on ${simulator.url}`);
  const stop = () => {
    void simulator.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((error: unknown) => {
  console.error(`card network simulator failed to start: ${(error as Error).message}`);
  process.exit(1);
});
