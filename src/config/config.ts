import { ConfigError } from './config.errors';
import { AppConfig, configSchema } from './config.schema';

/**
 * Every environment variable the service reads, validated once at boot into a
 * typed `AppConfig`. Nothing outside src/config reads `process.env`. A bad value
 * stops the boot with a message that names the variable (see ConfigError).
 *
 * The variables and their kinds: env.schema.ts; the shape the code reads:
 * config.schema.ts.
 */
export type { AppConfig } from './config.schema';
export { ConfigError } from './config.errors';
export type { ApiKeySeed } from './env-values';
export { DEFAULT_CARD_NETWORK_SECRET, DEFAULT_WEBHOOK_SECRET, DEVELOPMENT_ENVIRONMENTS } from './config.constants';

/** Validates an environment (process.env by default) into typed config. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  // An empty variable (`PORT=` in a compose file) means "use the default".
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''));
  const result = configSchema.safeParse(set);
  if (!result.success) throw ConfigError.fromIssues(result.error.issues);
  return result.data;
}
