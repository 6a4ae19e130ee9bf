import { randomUUID } from 'node:crypto';
import { INestApplication, Injectable } from '@nestjs/common';
import { ExternalContextCreator } from '@nestjs/core';
import { KafkaContext, NatsContext, RmqContext, TcpContext } from '@nestjs/microservices';
import { headers as natsHeaders } from 'nats';
import { Observable, lastValueFrom } from 'rxjs';
import { Idempotent } from 'safe-retries';
import { moduleApp } from '../support/module-app';

/**
 * Where a GraphQL field and a message find what they are keyed by, in the
 * context of each server and transport as it is: Apollo's (`{ req }`) and
 * Mercurius's (`req`, or `reply.request`); the message headers of NATS, Kafka
 * and RabbitMQ, and TCP's none. Only Mercurius and TCP run in these tests (no
 * Apollo driver, no Kafka or RabbitMQ broker), so the handlers are called as
 * @nestjs/graphql and @nestjs/microservices call them: through Nest's
 * ExternalContextCreator (interceptors, filters), with the arguments each
 * server gives (`[root, args, context, info]`; `[data, the transport's
 * context]`, built with @nestjs/microservices' own context classes). A key
 * read is a key kept: the second call with it is a replay, and the handler
 * runs once. The key sources (header, argument, field, function) and what the
 * module answers outside HTTP are tested through a resolver and a message
 * handler that run (graphql-resolvers.spec.ts, message-handlers.spec.ts).
 */

@Injectable()
class Handlers {
  runs = 0;

  @Idempotent()
  async credit(): Promise<{ run: number }> {
    return { run: ++this.runs };
  }

  @Idempotent({ key: { header: 'message-id' } })
  async ledger(): Promise<{ run: number }> {
    return { run: ++this.runs };
  }
}

describe('where a GraphQL field and a message find their key (the contexts of servers these tests do not run)', () => {
  let app: INestApplication;
  let close: () => Promise<void>;
  let handlers: Handlers;
  let graphql: (...args: unknown[]) => Promise<{ run: number }>;
  let message: (...args: unknown[]) => Promise<{ run: number }>;

  beforeAll(async () => {
    ({ app, close } = await moduleApp({ scope: (req) => req.headers['x-tenant'] as string | undefined }, [Handlers]));
    handlers = app.get(Handlers);
    const contexts = app.get(ExternalContextCreator);
    const options = { guards: true, interceptors: true, filters: true };
    graphql = contexts.create(handlers, handlers.credit, 'credit', undefined, undefined, undefined, undefined, options, 'graphql') as typeof graphql;
    message = contexts.create(handlers, handlers.ledger, 'ledger', undefined, undefined, undefined, undefined, options, 'rpc') as typeof message;
  });
  afterAll(() => close?.());

  const request = (key?: string) => ({ method: 'POST', url: '/graphql', headers: { 'x-tenant': 'tenant-a', ...(key ? { 'idempotency-key': key } : {}) } });
  /** The runs of two calls made with `call` (each given a new key): 1 when the key was found, 2 when it was not. */
  const runsOfTwo = async (call: (key: string) => Promise<unknown>): Promise<number> => {
    const before = handlers.runs;
    const key = randomUUID();
    await call(key);
    await call(key);
    return handlers.runs - before;
  };

  it("finds the HTTP request in Apollo's context (req) and in Mercurius's (req, or reply.request)", async () => {
    const info = { fieldName: 'credit', parentType: { name: 'Mutation' } };
    expect(await runsOfTwo((key) => graphql(undefined, {}, { req: request(key) }, info))).toBe(1);
    expect(await runsOfTwo((key) => graphql(undefined, {}, { reply: { request: request(key) } }, info))).toBe(1);
    // A context without the HTTP request: no key to find (the header is the default source), and the module says so.
    await expect(graphql(undefined, {}, undefined, info)).rejects.toMatchObject({ extensions: { code: 'IDEMPOTENCY_KEY_MISSING' } });
  });

  it('reads a header of NATS (getHeaders().get), Kafka (message headers, Buffers) and RabbitMQ (properties.headers); TCP has none', async () => {
    const nats = (key: string) => {
      const headers = natsHeaders();
      headers.set('message-id', key);
      return new NatsContext(['ledger.credit', headers]);
    };
    const kafka = (key: string) => new KafkaContext([{ headers: { 'message-id': Buffer.from(key) } }, 0, 'ledger.credit', undefined, undefined, undefined] as unknown as ConstructorParameters<typeof KafkaContext>[0]);
    const rabbit = (key: string) => new RmqContext([{ properties: { headers: { 'message-id': key } } }, undefined, 'ledger.credit']);
    for (const transport of [nats, kafka, rabbit]) expect(await runsOfTwo((key) => message({ amount: 1 }, transport(key)))).toBe(1);
    // A TCP context has neither getHeaders() nor getMessage().
    const tcp = new TcpContext([undefined, 'ledger.credit'] as unknown as ConstructorParameters<typeof TcpContext>[0]);
    // The module's filter answers as Nest's RPC layer does: an observable of the error the sender gets.
    const answer = (await message({ amount: 1 }, tcp)) as unknown as Observable<unknown>;
    await expect(lastValueFrom(answer)).rejects.toMatchObject({ status: 'error', code: 'IDEMPOTENCY_KEY_MISSING' });
  });
});
