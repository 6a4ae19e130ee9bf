/**
 * `safe-retries/swagger`: the idempotency policy in an app's OpenAPI document
 * and on its policy page. The only part of the library that loads
 * @nestjs/swagger (an optional peer):
 *
 *   const policy = app.get<ResolvedIdempotencyOptions>(IDEMPOTENCY_OPTIONS);
 *   describeIdempotentRoutes(app);              // before createDocument
 *   const document = applyIdempotencyPolicy(SwaggerModule.createDocument(app, config), policy);
 *   // serve policyMarkdown(policy) at policy.policyUrl, the module's `policyUrl`
 *   // option (without it, problems have `type: about:blank` and no Link)
 */
export { describeIdempotentRoutes } from './describe-idempotent-routes';
export { applyIdempotencyPolicy, policyMarkdown } from './idempotency-policy';
export { IDEMPOTENCY_OPTIONS } from '../config/idempotency.options';
export type { ResolvedIdempotencyOptions } from '../config/idempotency.options';
