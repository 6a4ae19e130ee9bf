import { ConfigError } from './config.errors';
import { AppConfig, configSchema } from './config.schema';
import { RETIRED_VARIABLES } from './env.schema';

/**
 * Every environment variable the service reads, validated once at boot into a
 * typed `AppConfig`. Nothing outside src/config reads `process.env`. A bad value,
 * or a variable the service no longer reads, stops the boot with a message that
 * names the variable (see ConfigError).
 *
 * The variables, their kinds and what they do: env.schema.ts (rendered into
 * docs/configuration.md); the shape the code reads: config.schema.ts.
 */
export type { AppConfig } from './config.schema';
export { ConfigError } from './config.errors';
export type { ApiKeySeed } from './env-values';
export { DEFAULT_CARD_NETWORK_SECRET, DEFAULT_WEBHOOK_SECRET, DEVELOPMENT_ENVIRONMENTS } from './config.constants';

/** Validates an environment (process.env by default) into typed config. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  // An empty variable (`PORT=` in a compose file) means "use the default".
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''));
  const retired = Object.keys(set)
    .filter((name) => Object.hasOwn(RETIRED_VARIABLES, name))
    .map((name) => `${name}: no longer read; ${RETIRED_VARIABLES[name]}`);
  const result = configSchema.safeParse(set);
  if (!result.success) throw new ConfigError([...retired, ...ConfigError.fromIssues(result.error.issues).problems]);
  if (retired.length) throw new ConfigError(retired);
  return result.data;
}
