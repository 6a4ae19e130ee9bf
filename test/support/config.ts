import type { AppConfig } from '../../src/config/config';

/**
 * Changes to a configuration for what no variable sets (the fixed limits of
 * src/config/config.schema.ts), so that a suite reaches a limit in a few
 * requests: `createTestApp({ config: failedAuthLimit(3) })`.
 */
export type ConfigChange = (config: AppConfig) => AppConfig;

/** Failed authentications a minute per address: this many instead of the fixed 60. */
export const failedAuthLimit =
  (perMinute: number): ConfigChange =>
  (config) => ({ ...config, rateLimit: { ...config.rateLimit, unauthenticatedPerMinute: perMinute } });

/** Payment admission: a queue of this many (instead of 1000). */
export const paymentsQueue =
  (queueLimit: number): ConfigChange =>
  (config) => ({ ...config, payments: { ...config.payments, queueLimit } });

/** A request must arrive whole within this (instead of the fixed 30 s). */
export const requestTimeout =
  (ms: number): ConfigChange =>
  (config) => ({ ...config, http: { ...config.http, requestTimeoutMs: ms } });

/** Order confirmations: at most this many per client an hour (instead of 1000). */
export const confirmationsPerClientPerHour =
  (perClientPerHour: number): ConfigChange =>
  (config) => ({ ...config, confirmations: { ...config.confirmations, perClientPerHour } });

/** Several changes, in order. */
export const changes =
  (...all: ConfigChange[]): ConfigChange =>
  (config) => all.reduce((c, change) => change(c), config);
