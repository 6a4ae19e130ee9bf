import type { z } from 'zod';

/** A configuration the boot refuses: one line a problem, each naming its variable. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }

  /** The problems of a failed parse of the environment: `VARIABLE: message` each. */
  static fromIssues(issues: readonly z.core.$ZodIssue[]): ConfigError {
    return new ConfigError(issues.map((issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`));
  }
}
