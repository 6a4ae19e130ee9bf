import type { AppConfig } from './config';

/**
 * Settings that are fine on a laptop and dangerous in production. The demo key
 * is published (README, .env.example): anyone could call a production service
 * that accepts it, so with NODE_ENV=production the boot stops on it.
 */
export const PUBLISHED_DEMO_KEY = 'sk_test_demo_0123456789abcdef';

export class UnsafeProductionConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsafeProductionConfigError';
  }
}

/** Throws (one line, naming the variable, never a secret) when production runs with a published key. */
export function refuseUnsafeProductionConfig(config: AppConfig): void {
  if (!config.production) return;
  const demo = config.apiKeys.find((seed) => seed.secret === PUBLISHED_DEMO_KEY);
  if (demo) {
    throw new UnsafeProductionConfigError(
      `refusing to start: API_KEYS gives client "${demo.name}" the published demo key, which anyone can use; set a secret of your own (NODE_ENV=production)`,
    );
  }
}
