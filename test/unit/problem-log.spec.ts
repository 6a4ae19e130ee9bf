import { ArgumentsHost, Logger } from '@nestjs/common';
import { QueryFailedError } from 'typeorm';
import { GraphQLProblem } from '../../src/http/graphql-problem';
import { ProblemDetailsFilter } from '../../src/http/problem-details.filter';

/** A 500 logs what the error is, never the SQL's parameters or the row values in pg's detail. */
describe('ProblemDetailsFilter logging of 500s', () => {
  it('logs class, code, message, constraint and the request id, and nothing of the data', () => {
    const driverError = Object.assign(new Error('duplicate key value violates unique constraint "clients_name_key"'), {
      code: '23505',
      constraint: 'clients_name_key',
      detail: 'Key (name)=(secret-customer-name) already exists.',
      table: 'clients',
    });
    const error = new QueryFailedError('INSERT INTO clients (name) VALUES ($1)', ['secret-customer-name'], driverError);
    const logged: unknown[] = [];
    const spy = jest.spyOn(Logger.prototype, 'error').mockImplementation((message: unknown) => void logged.push(message));
    const sent: { status?: number; body?: string } = {};
    // A Fastify reply, what the filter gets in a route.
    const res = {
      raw: { headersSent: false },
      header: () => res,
      code: (s: number) => ((sent.status = s), res),
      send: (b: string) => ((sent.body = b), res),
    };
    const host = {
      getType: () => 'http',
      switchToHttp: () => ({ getRequest: () => ({ id: 'req-42', query: { email: 'a@b.example' } }), getResponse: () => res }),
    } as unknown as ArgumentsHost;
    try {
      new ProblemDetailsFilter().catch(error, host);
    } finally {
      spy.mockRestore();
    }
    expect(sent.status).toBe(500);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({
      requestId: 'req-42',
      err: { class: 'QueryFailedError', code: '23505', constraint: 'clients_name_key', message: driverError.message },
    });
    const text = JSON.stringify(logged);
    expect(text).not.toContain('secret-customer-name');
    expect(text).not.toContain('a@b.example');
    expect(sent.body).not.toContain('secret-customer-name');
  });

  it('answers a GraphQL operation with a GraphQL error (INTERNAL_ERROR, nothing leaked), logged with the request id', () => {
    const logged: unknown[] = [];
    const spy = jest.spyOn(Logger.prototype, 'error').mockImplementation((message: unknown) => void logged.push(message));
    // Mercurius's context: the Fastify request is `req`.
    const request: { id: string; failure?: unknown } = { id: 'req-43' };
    const host = { getType: () => 'graphql', getArgByIndex: (i: number) => (i === 2 ? { req: request } : undefined) } as unknown as ArgumentsHost;
    const error = new Error('secret detail');
    let thrown: unknown;
    try {
      new ProblemDetailsFilter().catch(error, host);
    } catch (e) {
      thrown = e;
    } finally {
      spy.mockRestore();
    }
    expect(thrown).toBeInstanceOf(GraphQLProblem);
    expect((thrown as GraphQLProblem).extensions).toEqual({ code: 'INTERNAL_ERROR', status: 500 });
    expect((thrown as GraphQLProblem).message).not.toContain('secret detail');
    expect(logged[0]).toMatchObject({ requestId: 'req-43' });
    // The request line of the 5xx shows the exception.
    expect(request.failure).toBe(error);
  });
});
