import { CallHandler, ExecutionContext } from '@nestjs/common';
import { Observable, lastValueFrom, of } from 'rxjs';
import { asGraphQLError } from './context-errors';
import { fingerprint } from '../core/fingerprint';
import { idempotencyErrors } from '../contract/idempotency.errors';
import { ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { IdempotencyKeySource } from '../config/module-options';
import { IdempotencyRequest } from '../contract/idempotency-request';
import { IdempotentRoutes } from '../routes/idempotent-routes';
import { KeyedOperation } from '../core/keyed-operation';
import { VALUE_ANSWERS } from './value-answers';
import { requestScope } from '../core/scope';
import { RouteWarnings } from '../core/route-warnings';

/** The default key of a mutation: the header of the HTTP request that carries it. */
const DEFAULT_KEY: IdempotencyKeySource = { header: 'idempotency-key' };

/**
 * The GraphQL context as Apollo (`{ req }`) and Mercurius (`{ req, reply }`,
 * reply.request) give it under Nest: whatever carries the HTTP request.
 */
export interface GraphqlContext {
  req?: IdempotencyRequest;
  request?: IdempotencyRequest;
  reply?: { request?: IdempotencyRequest; header?(name: string, value: string): unknown };
}

/** The parts of a GraphQL selection set read here (graphql-js's AST, structurally). */
interface Selections {
  selections: readonly { kind: string; name?: { value: string }; alias?: { value: string }; selectionSet?: Selections }[];
}

/** What the resolver's info says of the field: enough to name the operation, and its document's other fields. */
interface FieldInfo {
  fieldName?: string;
  parentType?: { name?: string };
  operation?: { selectionSet?: Selections };
  fragments?: Record<string, { selectionSet?: Selections } | undefined>;
}

/** The HTTP request that carries a GraphQL operation. */
export function graphqlHttpRequest(ctx: GraphqlContext | undefined): IdempotencyRequest | undefined {
  return ctx?.req ?? ctx?.request ?? ctx?.reply?.request;
}

/**
 * @Idempotent() on a GraphQL resolver field (a mutation), read through Nest's
 * arguments `[root, args, context, info]`, so this module needs nothing of
 * @nestjs/graphql:
 *
 * - the key: the `Idempotency-Key` header of the HTTP request carrying the
 *   operation, or what `key` names (an argument, another header, a function);
 * - the scope: the module's `scope` applied to that HTTP request;
 * - the fingerprint: the parent type and field name and the field's arguments
 *   (canonical JSON), not the query's text, which a retry may format otherwise;
 * - the answer: the resolver's value stored as JSON and given back as the
 *   resolver's value (so the query's selection still applies to a replay);
 *   a replay sets `Idempotent-Replayed: true` on the HTTP reply where the
 *   server exposes one (Mercurius), and is counted and traced as any replay;
 * - one key, one field: under a key read from a header (the default), an
 *   operation that selects the field more than once (aliases) is refused before
 *   any of them runs (IDEMPOTENCY_KEY_REUSED): the first would create, the next
 *   ones find the key taken, and the answer would lose the first one's result;
 * - problems: GraphQL errors with `extensions.code` (context-errors.ts).
 */
export class GraphqlIdempotency {
  constructor(
    private readonly routes: IdempotentRoutes,
    private readonly options: ResolvedIdempotencyOptions,
    private readonly operations: KeyedOperation,
    private readonly warnings: RouteWarnings,
  ) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    try {
      return await this.handle(context, next);
    } catch (error) {
      throw asGraphQLError(error);
    }
  }

  private async handle(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const [, rawArgs, ctx, info] = context.getArgs<[unknown, Record<string, unknown> | undefined, GraphqlContext | undefined, FieldInfo | undefined]>();
    const args = rawArgs ?? {};
    const route = this.routes.of(context);
    const { policyUrl } = this.options;
    const request = graphqlHttpRequest(ctx);

    const key = this.operations.keyOf(route, readGraphqlKey(route.key ?? DEFAULT_KEY, args, ctx, request));
    if (key === undefined) return next.handle();

    if (!request) throw new Error('@Idempotent() on a GraphQL resolver: the GraphQL context carries no HTTP request (ctx.req or ctx.reply.request) to read the scope from');
    const scope = requestScope(this.options.scope(request), policyUrl, (fault) =>
      this.warnings.once('scope', `${context.getClass().name}.${context.getHandler().name}`, `IdempotencyModule's \`scope\` ${fault} (the GraphQL operation's HTTP request); put the resolver behind the app's authentication, or give a \`scope\` that finds the principal there`),
    );
    const field = `${info?.parentType?.name ?? 'Mutation'}.${info?.fieldName ?? route.operation}`;
    const source = route.key ?? DEFAULT_KEY;
    if (typeof source !== 'function' && 'header' in source && info?.fieldName) {
      const times = responseNames(info.fieldName, info.operation?.selectionSet, info.fragments ?? {}).size;
      if (times > 1) throw idempotencyErrors.sharedByFields(policyUrl, field, times);
    }
    const answer = await this.operations.run(
      route,
      { scope, key, fingerprint: fingerprint('GRAPHQL', field, args) },
      () => lastValueFrom(next.handle(), { defaultValue: undefined }),
      VALUE_ANSWERS,
    );
    if (answer.replayed) ctx?.reply?.header?.('Idempotent-Replayed', 'true');
    return of(answer.value);
  }
}

/** The key of a GraphQL field, read where `source` says (undefined: the operation has none). */
export function readGraphqlKey(source: IdempotencyKeySource, args: Record<string, unknown>, ctx: GraphqlContext | undefined, request: IdempotencyRequest | undefined): string | undefined {
  if (typeof source === 'function') return source(args, ctx);
  if ('arg' in source) return asKey(args[source.arg]);
  if ('header' in source) {
    const value = request?.headers[source.header.toLowerCase()];
    return Array.isArray(value) ? value.join(', ') : value;
  }
  throw new Error(`@Idempotent() on a GraphQL resolver: key { field } names a message's field; use { arg } or { header }`);
}

/** An argument's value as a key: a string, or undefined when absent (null counts as absent). */
function asKey(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  return typeof value === 'string' ? value : String(value as number);
}

/**
 * The response names (alias, else the name) under which the operation's top
 * level selects the field `name`, through fragments too: each is one run of
 * the resolver (selections under one response name are merged into one).
 */
function responseNames(
  name: string,
  set: Selections | undefined,
  fragments: NonNullable<FieldInfo['fragments']>,
  names = new Set<string>(),
  seen = new Set<string>(),
): Set<string> {
  for (const s of set?.selections ?? []) {
    if (s.kind === 'Field' && s.name?.value === name) names.add(s.alias?.value ?? name);
    else if (s.kind === 'InlineFragment') responseNames(name, s.selectionSet, fragments, names, seen);
    else if (s.kind === 'FragmentSpread' && s.name && !seen.has(s.name.value)) {
      seen.add(s.name.value);
      responseNames(name, fragments[s.name.value]?.selectionSet, fragments, names, seen);
    }
  }
  return names;
}
