import { Module } from '@nestjs/common';
import { GraphQLModule } from '@nestjs/graphql';
import { MercuriusDriver, MercuriusDriverConfig } from '@nestjs/mercurius';
import { redactingErrorFormatter } from '../http/graphql-problem';

/** Where the GraphQL endpoint is served: POST (and GET for queries), on the app's Fastify server. */
export const GRAPHQL_PATH = '/graphql';

/**
 * The GraphQL endpoint (Mercurius on the app's Fastify instance), code first:
 * the schema is built from the resolvers' decorators at startup, kept in
 * memory. It sits behind the same hooks as every route (API key before the
 * body is read, JSON only, body size and depth, request log). The IDE
 * (GraphiQL) is off: its page would need a looser CSP than the API's.
 */
@Module({
  imports: [
    GraphQLModule.forRoot<MercuriusDriverConfig>({
      driver: MercuriusDriver,
      path: GRAPHQL_PATH,
      autoSchemaFile: true,
      sortSchema: true,
      graphiql: false,
      // A query nested deeper than this is refused before it runs.
      queryDepth: 8,
      // graphql-js echoes input in its messages: no card number goes back in one.
      errorFormatter: redactingErrorFormatter,
    }),
  ],
})
export class GraphqlApiModule {}
