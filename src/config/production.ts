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
 * - no IDEMPOTENCY_ENCRYPTION_KEYS: webhook endpoints' signing secrets (they
 *   sign, so they cannot be hashed) and stored responses would be kept in
 *   clear.
 * - an HTTP_TRUST_PROXY range of every address (`/0`), or ranges that together
 *   hold every IPv4 address in any notation (`0.0.0.0/1,128.0.0.0/1`, the
 *   mapped `::ffff:0:0/96`, `::/64`): any client would choose the address the
 *   failed-auth limit counts by sending X-Forwarded-For.
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
  if (config.idempotency.postgres.encryptionKeys.length === 0) {
    refuse("IDEMPOTENCY_ENCRYPTION_KEYS is not set, so webhook endpoints' signing secrets and stored responses would be kept in clear; set a key ring");
  }
  if (config.http.trustProxy.some((entry) => entry.split('/')[1] === '0')) {
    refuse('HTTP_TRUST_PROXY holds a range of every address (/0), so any client could choose its address with X-Forwarded-For; list only your load balancers and proxies');
  }
  if (coversEveryIPv4(config.http.trustProxy)) {
    refuse(
      'HTTP_TRUST_PROXY holds every IPv4 address (its ranges together, IPv4-mapped IPv6 ::ffff:0:0/96 included), so any client could choose its address with X-Forwarded-For; list only your load balancers and proxies',
    );
  }
}

/** Settings production accepts but an operator should know of: one line each, written at boot. */
export function productionWarnings(config: AppConfig): string[] {
  if (!config.production) return [];
  const warnings: string[] = [];
  if (config.cardNetwork.apiKey.startsWith('sk_test_')) {
    warnings.push(`CARD_NETWORK_SECRET is a test-mode key (sk_test_...): the card network charges no real card (NODE_ENV=${config.nodeEnv})`);
  }
  if (config.http.trustProxy.length === 0) {
    // Clients reaching the instance directly need nothing; behind a balancer (in a private
    // range, on loopback or on a public address alike) this is the line to act on.
    warnings.push(
      `HTTP_TRUST_PROXY is empty: behind a load balancer or proxy every client has its address, one failed-auth budget and one address's share of the connections for all; list your proxies in HTTP_TRUST_PROXY (NODE_ENV=${config.nodeEnv})`,
    );
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

const IPV4_COUNT = 2 ** 32;

/**
 * Whether HTTP_TRUST_PROXY's entries (addresses and CIDRs) together hold every IPv4
 * address. An IPv6 range counts for the IPv4 addresses it holds as IPv4-mapped
 * addresses (::ffff:a.b.c.d), which is how a proxy check compares an IPv4 peer
 * with an IPv6 range: `::ffff:0:0/96`, `::ffff:0.0.0.0/96` and `::/64` each
 * hold them all.
 */
export function coversEveryIPv4(entries: readonly string[]): boolean {
  const spans = entries.map(ipv4Span).filter((s): s is [number, number] => s !== undefined);
  spans.sort((a, b) => a[0] - b[0]);
  let next = 0;
  for (const [first, last] of spans) {
    if (first > next) return false;
    next = Math.max(next, last + 1);
    if (next >= IPV4_COUNT) return true;
  }
  return false;
}

/** The first and last IPv4 address (as numbers) an entry holds; undefined when none. */
function ipv4Span(entry: string): [number, number] | undefined {
  const [address, bits] = entry.trim().split('/');
  const family = isIP(address);
  if (family === 4) return spanOf(ipv4Number(address), bits === undefined ? 32 : Number(bits));
  if (family !== 6) return undefined;
  const words = ipv6Words(address);
  if (!words) return undefined;
  const prefix = bits === undefined ? 128 : Number(bits);
  // The mapped block is ::ffff:0:0/96: the range's first bits (up to 96) must be that block's.
  const MAPPED = [0, 0, 0, 0, 0, 0xffff];
  for (let i = 0; i < 6; i++) {
    const k = Math.min(16, Math.max(0, prefix - 16 * i));
    const mask = k === 0 ? 0 : (0xffff << (16 - k)) & 0xffff;
    if ((words[i] ^ MAPPED[i]) & mask) return undefined;
  }
  if (prefix <= 96) return [0, IPV4_COUNT - 1];
  return spanOf(words[6] * 0x10000 + words[7], prefix - 96);
}

function spanOf(address: number, prefix: number): [number, number] {
  const size = 2 ** (32 - prefix);
  const first = address - (address % size);
  return [first, first + size - 1];
}

function ipv4Number(address: string): number {
  return address.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
}

/** The eight 16-bit words of an IPv6 address (an embedded IPv4 tail and `::` included). */
function ipv6Words(address: string): number[] | undefined {
  let text = address.toLowerCase();
  if (text.includes('%')) return undefined;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const n = ipv4Number(v4[1]);
    text = `${text.slice(0, v4.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const part = (s: string | undefined) => (s ? s.split(':').map((w) => parseInt(w, 16)) : []);
  const left = part(head);
  const right = part(tail);
  const words = tail === undefined ? left : [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  return words.length === 8 && words.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff) ? words : undefined;
}
