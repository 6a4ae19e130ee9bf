import { ArgumentsHost } from '@nestjs/common';

/**
 * What carries the HTTP request of a GraphQL operation in its context
 * (`[root, args, context, info]`): Mercurius under Nest gives `{ req, reply }`.
 */
interface GraphqlContext<Req, Reply> {
  req?: Req;
  reply?: Reply & { request?: Req };
}

function graphqlContext<Req, Reply>(context: ArgumentsHost): GraphqlContext<Req, Reply> {
  const ctx = context.getArgByIndex<GraphqlContext<Req, Reply> | undefined>(2);
  if (!ctx) throw new Error('a GraphQL operation without its context');
  return ctx;
}

/**
 * The Fastify request behind a route or a GraphQL operation: the guards and
 * decorators that read the caller (API key, client, Idempotency-Key) work the
 * same for both. Other contexts have no HTTP request (undefined).
 */
export function httpRequestOf<Req>(context: ArgumentsHost): Req | undefined {
  const type = context.getType<string>();
  if (type === 'http') return context.switchToHttp().getRequest<Req>();
  if (type !== 'graphql') return undefined;
  const ctx = graphqlContext<Req, unknown>(context);
  return ctx.req ?? ctx.reply?.request;
}

/** The Fastify reply of a route or a GraphQL operation (undefined in other contexts). */
export function httpReplyOf<Reply>(context: ArgumentsHost): Reply | undefined {
  const type = context.getType<string>();
  if (type === 'http') return context.switchToHttp().getResponse<Reply>();
  if (type !== 'graphql') return undefined;
  return graphqlContext<unknown, Reply>(context).reply;
}
