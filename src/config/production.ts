import { isIP } from 'node:net';
import { AppConfig, DEFAULT_CARD_NETWORK_SECRET, DEFAULT_WEBHOOK_SECRET } from './config';

/**
 * Settings that are fine on a laptop and dangerous in production. With
 * NODE_ENV=production the boot stops on the first one it meets, with one line
 * that names the variable and never prints a secret:
 *
 * - a published secret: the demo API key (README, .env.example), the bundled
 *   simulator's test key and webhook secret. Anyone can send them.
 * - the embedded card network simulator (no CARD_NETWORK_URL): it "charges"
 *   inside the app, so orders would be marked paid while no money moves.
 * - a card network over plain http to another host: the API key and the card
 *   data would cross the network in clear.
 * - the embedded PostgreSQL (no DATABASE_URL): a development database in a
 *   local directory, with no backups and no replica.
 */
export const PUBLISHED_DEMO_KEY = 'sk_test_demo_0123456789abcdef';

export class UnsafeProductionConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsafeProductionConfigError';
  }
}

/** Throws (one line, naming the variable, never a secret) when production runs with a development-only setting. */
export function refuseUnsafeProductionConfig(config: AppConfig): void {
  if (!config.production) return;
  const refuse = (message: string) => {
    throw new UnsafeProductionConfigError(`refusing to start: ${message} (NODE_ENV=production)`);
  };
  const demo = config.apiKeys.find((seed) => seed.secret === PUBLISHED_DEMO_KEY);
  if (demo) {
    refuse(`API_KEYS gives client "${demo.name}" the published demo key, which anyone can use; set a secret of your own`);
  }
  const { url, apiKey, webhookSecrets } = config.cardNetwork;
  if (!url) {
    refuse('CARD_NETWORK_URL is not set, so the embedded card network simulator would take the payments and no money would move; set it to your card network (e.g. https://api.stripe.com)');
  } else if (!url.startsWith('https://') && !isLoopbackUrl(url)) {
    refuse('CARD_NETWORK_URL uses http to a host that is not this machine; use https (plain http is accepted only for 127.0.0.0/8, ::1 and localhost)');
  }
  if (apiKey === DEFAULT_CARD_NETWORK_SECRET) {
    refuse("STRIPE_API_KEY is the card network simulator's published test key; set your card network's secret key");
  }
  if (webhookSecrets.includes(DEFAULT_WEBHOOK_SECRET)) {
    refuse("STRIPE_WEBHOOK_SECRET holds the card network simulator's published webhook secret, so anyone could sign a webhook; set only your webhook endpoints' signing secrets");
  }
  if (!config.database.url) {
    refuse('DATABASE_URL is not set, so the embedded development PostgreSQL would hold the payments; set it to your PostgreSQL');
  }
}

/** Whether the URL's host is this machine: 127.0.0.0/8, ::1 or localhost. */
export function isLoopbackUrl(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (host === 'localhost' || host === '::1') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

/**
 * Whether the card network is the bundled simulator, whose fault test methods
 * (tok_chargeThen*, pm_card_chargeThen*) only it knows: the embedded one (no
 * CARD_NETWORK_URL), or outside production one on this machine (the standalone
 * simulator of `npm run card-network`). Anywhere else such a source is refused.
 */
export function cardNetworkIsSimulator(config: AppConfig): boolean {
  const { url } = config.cardNetwork;
  return url === undefined || (!config.production && isLoopbackUrl(url));
}
