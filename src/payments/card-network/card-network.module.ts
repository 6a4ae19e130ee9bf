import { DynamicModule, Inject, Injectable, Logger, Module, OnApplicationShutdown } from '@nestjs/common';
import { type AppConfig, ConfigError } from '../../config/config';
import { APP_CONFIG } from '../../config/config.module';
import { CardNetwork } from './card-network';
import { StripeCardNetwork } from './stripe-card-network';

/** Where the card network answers, and how to let go of it. */
export interface CardNetworkEndpoint {
  url: string;
  /** True when the bundled simulator runs inside this process. */
  embedded: boolean;
  /**
   * The embedded simulator sends its webhooks to this URL (the app's own
   * webhook route, known once the app listens), signed with the app's
   * (first) CARD_NETWORK_WEBHOOK_SECRET. A no-op for a network of its own, which is told
   * its webhook URL in its own configuration.
   */
  deliverWebhooksTo(url: string): void;
  close(): Promise<void>;
}

export const CARD_NETWORK_ENDPOINT = Symbol('CARD_NETWORK_ENDPOINT');
/** Provided (true) by CardNetworkModule.closed(): this process never opens the card network. */
const CARD_NETWORK_CLOSED = Symbol('CARD_NETWORK_CLOSED');
/** Where a process that never opens the card network points its client: a name that cannot resolve (RFC 2606). */
const CLOSED_URL = 'http://card-network.invalid';

/**
 * CARD_NETWORK_URL set: that API (the standalone simulator, or Stripe itself).
 * Unset: the bundled simulator starts inside the app on a free loopback port,
 * as the embedded PostgreSQL does, so `npm start` needs nothing else; its ledger
 * then lives as long as the app. Closed (CardNetworkModule.closed()): neither.
 */
async function openEndpoint(config: AppConfig, closed = false): Promise<CardNetworkEndpoint> {
  const { url } = config.cardNetwork;
  if (closed) return { url: CLOSED_URL, embedded: false, deliverWebhooksTo: () => undefined, close: async () => undefined };
  if (url) return { url, embedded: false, deliverWebhooksTo: () => undefined, close: async () => undefined };
  return startEmbedded(config);
}

/**
 * The simulator is a development and test tool (a dev dependency, its own
 * workspace package), loaded only here: production refuses to start without
 * CARD_NETWORK_URL (refuseUnsafeProductionConfig), so a production process never
 * loads it and its image does not carry it.
 */
async function startEmbedded(config: AppConfig): Promise<CardNetworkEndpoint> {
  const { apiKey, delayMs, webhookSecrets } = config.cardNetwork;
  const { startCardNetworkSimulator } = await loadSimulator();
  const simulator = await startCardNetworkSimulator({ secrets: [apiKey], delayMs, port: 0, host: '127.0.0.1' });
  new Logger('CardNetwork').log(`embedded card network simulator on ${simulator.url} (set CARD_NETWORK_URL to use another)`);
  return {
    url: simulator.url,
    embedded: true,
    deliverWebhooksTo: (target) => simulator.setWebhook({ url: target, secret: webhookSecrets[0] }),
    close: () => simulator.close(),
  };
}

/** The simulator package, or a configuration error (one line at boot) where it is not installed or not built. */
async function loadSimulator(): Promise<typeof import('@safe-retries/card-network-simulator')> {
  try {
    return await import('@safe-retries/card-network-simulator');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') throw e;
    throw new ConfigError([
      'CARD_NETWORK_URL is not set and the embedded card network simulator cannot be loaded (@safe-retries/card-network-simulator: a development dependency, built by `npm run build`); set CARD_NETWORK_URL to your card network',
    ]);
  }
}

@Injectable()
class CardNetworkLifecycle implements OnApplicationShutdown {
  constructor(@Inject(CARD_NETWORK_ENDPOINT) private readonly endpoint: CardNetworkEndpoint) {}

  /** After the HTTP server has drained: no request still waits on the network. */
  async onApplicationShutdown(): Promise<void> {
    await this.endpoint.close();
  }
}

@Module({
  providers: [
    {
      provide: CARD_NETWORK_ENDPOINT,
      inject: [APP_CONFIG, { token: CARD_NETWORK_CLOSED, optional: true }],
      useFactory: (config: AppConfig, closed?: boolean) => openEndpoint(config, closed),
    },
    {
      provide: CardNetwork,
      inject: [APP_CONFIG, CARD_NETWORK_ENDPOINT],
      useFactory: (config: AppConfig, endpoint: CardNetworkEndpoint) =>
        new StripeCardNetwork({
          url: endpoint.url,
          apiKey: config.cardNetwork.apiKey,
          timeoutMs: config.cardNetwork.timeoutMs,
          maxRetries: config.cardNetwork.maxRetries,
          webhookSecrets: config.cardNetwork.webhookSecrets,
        }),
    },
    CardNetworkLifecycle,
  ],
  exports: [CardNetwork, CARD_NETWORK_ENDPOINT],
})
export class CardNetworkModule {
  /**
   * Imported by a process that charges nothing (a command-line run): the card
   * network is never opened, so no embedded simulator starts, and any call
   * fails as unreachable. Global, so it reaches the CardNetworkModule that
   * PaymentsModule imports.
   */
  static closed(): DynamicModule {
    return {
      module: CardNetworkClosedModule,
      global: true,
      providers: [{ provide: CARD_NETWORK_CLOSED, useValue: true }],
      exports: [CARD_NETWORK_CLOSED],
    };
  }
}

@Module({})
class CardNetworkClosedModule {}
