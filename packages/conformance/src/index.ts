/**
 * @safe-retries/conformance: checks any Idempotency-Key server black-box
 * against the IETF draft and Stripe's documented behaviour.
 */
export { runConformance, formatTable } from './run';
export type { ConformanceOptions, ConformanceReport, CheckResult } from './run';
export { CHECKS } from './checks';
export type { Check, Outcome, Verdict } from './checks';
export { httpEffects, sqlEffects } from './effects';
export type { EffectCounter } from './effects';
export type { Target, Header } from './target';
export { main } from './main';
