/** `safe-retries/graphql`: what a GraphQL client is told of the module's problems. */
export { CONTEXT_ERROR_CODES, IdempotencyGraphQLError, REPLAYED_OUTCOME_CODE } from './context-errors';
export type { ContextErrorCode, ContextErrorDetails } from './context-errors';
