import { DynamicModule, Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { AuthModule } from './auth/auth.module';
import { MetricsTokenAccess } from './auth/metrics-token.access';
import type { RequestWithClient } from './auth/current-client.decorator';
import { CardNumberKeyGuard } from './http/card-number-key.guard';
import { AppConfig } from './config/config';
import { AppConfigModule } from './config/config.module';
import { databaseMode } from './database/database-mode';
import { DatabaseModule } from './database/database.module';
import { EventsModule } from './events/events.module';
import { WEBHOOK_DELIVERY_TOPIC, WebhookDeliveryPort, WebhookDeliveryPortModule } from './events/webhook-delivery.port';
import { GraphqlApiModule } from './graphql/graphql-api.module';
import { HealthModule } from './health/health.module';
import { IdempotencyModule, IdempotencyModuleOptions } from 'safe-retries';
import { OutboxPublisher } from 'safe-retries/outbox';
import { RedisIdempotencyStore } from 'safe-retries/redis';
import { LoggingModule } from './logging/logging.module';
import { MetricsModule } from './metrics/metrics.module';
import { MetricsService } from './metrics/metrics.service';
import { NotificationsModule } from './notifications/notifications.module';
import { confirmationPublisher } from './notifications/confirmation-publisher';
import { Notifier } from './notifications/notifier';
import { NotifierModule } from './notifications/notifier.module';
import { IdempotencyKeysModule } from './idempotency-keys/idempotency-keys.module';
import { OrdersModule } from './orders/orders.module';
import { CardNetworkModule } from './payments/card-network/card-network.module';
import { PaymentsModule } from './payments/payments.module';
import { WebhookEndpointsModule } from './webhook-endpoints/webhook-endpoints.module';

export interface AppModuleOptions {
  config: AppConfig;
  /** The database to use: external (DATABASE_URL) or the embedded one main.ts started. */
  databaseUrl: string;
  /** Apply migrations on boot (default true). */
  migrate?: boolean;
  /**
   * 'server' (default): the service. 'cli': a one-off command (src/cli) with the
   * same modules and database, and nothing that outlives the command or reaches
   * out: no metrics listener, no purge or recovery job, no outbox relay, no card
   * network (so no embedded simulator).
   */
  role?: 'server' | 'cli';
}

/** The configuration of a command-line run: the background parts turned off. */
function forCommandLine(config: AppConfig): AppConfig {
  return {
    ...config,
    idempotency: {
      ...config.idempotency,
      purge: { ...config.idempotency.purge, enabled: false },
      recovery: { ...config.idempotency.recovery, enabled: false },
      outbox: { ...config.idempotency.outbox, enabled: false },
    },
    metrics: { ...config.metrics, port: undefined },
    // No routes are served: no Redis connection.
    redis: { url: undefined },
  };
}

/** The outbox's one publisher: webhook deliveries to theirs, everything else to the confirmations'. */
function outboxPublisher(confirmations: OutboxPublisher, webhooks: WebhookDeliveryPort): OutboxPublisher {
  const publish: OutboxPublisher = (message, signal) => (message.topic === WEBHOOK_DELIVERY_TOPIC ? webhooks.publish(message, signal) : confirmations(message, signal));
  publish.close = () => webhooks.close();
  return publish;
}

@Module({})
export class AppModule {
  static register(options: AppModuleOptions): DynamicModule {
    const cli = options.role === 'cli';
    const config = cli ? forCommandLine(options.config) : options.config;
    const mode = databaseMode(config.database);
    return {
      module: AppModule,
      imports: [
        AppConfigModule.forRoot(config),
        LoggingModule.forRoot({ level: config.logLevel }),
        DatabaseModule.forRoot({
          url: options.databaseUrl,
          poolSize: config.database.poolSize,
          replicaUrls: config.database.replicaUrls,
          migrate: options.migrate ?? true,
          preparedStatements: mode.preparedStatements,
          directUrl: mode.directUrl,
          // The request timeout (30 s): a request is given as long for its turn at the
          // database, and for each answer, as for its arrival.
          deadlineMs: config.http.requestTimeoutMs,
        }),
        // /metrics opens with the metrics token; a wrong one counts as a failed authentication.
        MetricsModule.forRoot({ imports: [AuthModule], access: MetricsTokenAccess }),
        // The scheduler of the app's own jobs (refund settlement); the idempotency module runs its own.
        ScheduleModule.forRoot(),
        IdempotencyModule.forRootAsync({
          imports: [NotifierModule, WebhookDeliveryPortModule],
          inject: [MetricsService, Notifier, WebhookDeliveryPort],
          useFactory: (metrics: MetricsService, notifier: Notifier, webhooks: WebhookDeliveryPort) => ({
            // Its migrations run among the app's own (migrations/index.ts), by DatabaseModule.
            migrations: false,
            // The policy page app.setup.ts serves: the `type` and `Link` of the module's problems.
            policyUrl: '/docs/idempotency',
            // Lease, retention, pools, jobs, replay cache and keys: the configuration's, as they are.
            ...config.idempotency,
            postgres: {
              ...config.idempotency.postgres,
              preparedStatements: mode.preparedStatements,
              transactionPooler: mode.transactionPooler,
              listenUrl: mode.directUrl,
            },
            scope: (req) => (req as Pick<RequestWithClient, 'client'>).client?.id,
            // The Redis store, for routes that name it (`@Idempotent({ store: 'redis' })`).
            ...(config.redis.url ? { stores: { redis: new RedisIdempotencyStore({ url: config.redis.url }) } } : {}),
            registry: metrics.registry,
            // Order confirmations and the clients' webhooks go out through the outbox's relay, where the jobs run
            // (IDEMPOTENCY_JOBS; never in a command-line run).
            outbox: {
              // The module's defaults (lease, horizon, retention), unless a test's configuration shortens them.
              ...(config.idempotency as IdempotencyModuleOptions).outbox,
              publish: outboxPublisher(confirmationPublisher(notifier), webhooks),
            },
          }),
        }),
        AuthModule,
        HealthModule,
        OrdersModule,
        PaymentsModule,
        IdempotencyKeysModule,
        WebhookEndpointsModule,
        EventsModule,
        // Its caps are counted in Redis: mounted only with REDIS_URL.
        ...(config.redis.url ? [NotificationsModule] : []),
        ...(cli ? [CardNetworkModule.closed()] : [GraphqlApiModule]),
      ],
      // A guard runs before every interceptor: a card number in an Idempotency-Key is refused before any claim.
      providers: [{ provide: APP_GUARD, useClass: CardNumberKeyGuard }],
    };
  }
}
