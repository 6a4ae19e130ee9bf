import { Check } from './check';
import { concurrencyChecks } from './concurrency';
import { keyChecks } from './keys';
import { replayChecks } from './replay';

/** Every check, in the order they run and print. */
export const CHECKS: Check[] = [...keyChecks, ...replayChecks, ...concurrencyChecks];
export type { Check, Outcome, Verdict } from './check';
