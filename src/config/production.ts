import { isIP } from 'node:net';
import { AppConfig, DEFAULT_CARD_NETWORK_SECRET, DEFAULT_WEBHOOK_SECRET } from './config';

/**
 * Settings that are fine on a laptop and dangerous in production. Every
 * NODE_ENV but `development` and `test` gets these rules (`production`,
 * `prod`, `staging`, a typo: production fails closed); the boot stops on the
 * first one it meets, with one line that names the variable and never prints a
 * secret:
 *
 * - a published secret: the demo API key (README, .env.example), the bundled
 *   simulator's test key and webhook secret. Anyone can send them.
 * - the embedded card network simulator (no CARD_NETWORK_URL): it "charges"
 *   inside the app, so orders would be marked paid while no money moves.
 * - a card network over plain http to another host: the API key and the card
 *   data would cross the network in clear.
 * - the embedded PostgreSQL (no DATABASE_URL): a development database in a
 *   local directory, with no backups and no replica.
 * - an HTTP_TRUST_PROXY range of every address (`/0`): any client would choose
 *   the address the failed-auth limit counts by sending X-Forwarded-For.
 * The order confirmations' notifier that only logs is refused where the
 * notifier is bound (NotificationsModule), with the same error.
 */
export const PUBLISHED_DEMO_KEY = 'sk_test_demo_0123456789abcdef';

/** Why production refuses to run without DATABASE_URL (the boot, and a CLI command, say it). */
export const EMBEDDED_DATABASE_REFUSAL = 'DATABASE_URL is not set, so the embedded development PostgreSQL would hold the payments; set it to your PostgreSQL';

export class UnsafeProductionConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsafeProductionConfigError';
  }
}

/** The refusal of a development-only setting, in the words every refusal uses. */
export function unsafeProductionConfig(config: AppConfig, message: string): UnsafeProductionConfigError {
  return new UnsafeProductionConfigError(`refusing to start: ${message} (NODE_ENV=${config.nodeEnv})`);
}

/** Throws (one line, naming the variable, never a secret) when production runs with a development-only setting. */
export function refuseUnsafeProductionConfig(config: AppConfig): void {
  if (!config.production) return;
  const refuse = (message: string) => {
    throw unsafeProductionConfig(config, message);
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
    refuse("CARD_NETWORK_SECRET is the card network simulator's published test key; set your card network's secret key");
  }
  if (webhookSecrets.includes(DEFAULT_WEBHOOK_SECRET)) {
    refuse("CARD_NETWORK_WEBHOOK_SECRET holds the card network simulator's published webhook secret, so anyone could sign a webhook; set only your webhook endpoints' signing secrets");
  }
  if (!config.database.url) {
    refuse(EMBEDDED_DATABASE_REFUSAL);
  }
  if (config.http.trustProxy.some((entry) => entry.split('/')[1] === '0')) {
    refuse('HTTP_TRUST_PROXY holds a range of every address (/0), so any client could choose its address with X-Forwarded-For; list only your load balancers and proxies');
  }
}

/** Settings production accepts but an operator should know of: one line each, written at boot. */
export function productionWarnings(config: AppConfig): string[] {
  if (!config.production) return [];
  const warnings: string[] = [];
  if (config.cardNetwork.apiKey.startsWith('sk_test_')) {
    warnings.push(`CARD_NETWORK_SECRET is a test-mode key (sk_test_...): the card network charges no real card (NODE_ENV=${config.nodeEnv})`);
  }
  return warnings;
}

/** Whether the URL's host is this machine: 127.0.0.0/8, ::1 or localhost. */
export function isLoopbackUrl(url: string): boolean {
  return URL.canParse(url) && isLoopbackHost(new URL(url).hostname);
}

/** Whether a host name or address (`[::1]` too) is this machine: 127.0.0.0/8, ::1 or localhost. */
function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
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
