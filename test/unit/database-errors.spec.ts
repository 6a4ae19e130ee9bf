import { connect, createServer } from 'node:net';
import { isDatabaseUnavailable, sqlState, violatedConstraint } from '../../src/database/database-errors';

/** An Error with the extra fields node-postgres sets on a DatabaseError. */
function pgError(code: string, message = 'database error', extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message), { code, ...extra });
}

/** The shape of TypeORM's QueryFailedError: the driver's error under `driverError`. */
class QueryFailedErrorLike extends Error {
  constructor(readonly driverError: unknown) {
    super((driverError as Error | undefined)?.message ?? 'query failed');
    this.name = 'QueryFailedError';
  }
}

/** A socket error as node:net reports it. */
function socketError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, errno: -111, syscall: 'connect' });
}

describe('isDatabaseUnavailable', () => {
  it.each([
    ['08000 connection_exception', '08000'],
    ['08001 sqlclient_unable_to_establish_sqlconnection', '08001'],
    ['08003 connection_does_not_exist', '08003'],
    ['08004 sqlserver_rejected_establishment_of_sqlconnection', '08004'],
    ['08006 connection_failure', '08006'],
    ['08P01 protocol_violation', '08P01'],
    ['57P01 admin_shutdown', '57P01'],
    ['57P02 crash_shutdown', '57P02'],
    ['57P03 cannot_connect_now', '57P03'],
    ['53300 too_many_connections', '53300'],
    ['53000 insufficient_resources', '53000'],
  ])('is true for SQLSTATE %s', (_name, code) => {
    expect(isDatabaseUnavailable(pgError(code))).toBe(true);
  });

  it.each(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN'])(
    'is true for the socket error %s',
    (code) => {
      expect(isDatabaseUnavailable(socketError(code))).toBe(true);
    },
  );

  it('is true for the error node:net really reports for a refused connection', async () => {
    // Find a port nobody listens on: bind an ephemeral one, then close it.
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.on('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const { port: p } = server.address() as { port: number };
        server.close(() => resolve(p));
      });
    });
    const error = await new Promise<Error>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', resolve);
      socket.on('connect', () => {
        socket.destroy();
        resolve(new Error('unexpectedly connected'));
      });
    });
    expect((error as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it('is true for an AggregateError from dual-stack connect attempts (Node sets the first code on it)', () => {
    const aggregate = Object.assign(new AggregateError([socketError('ECONNREFUSED'), socketError('ECONNREFUSED')], ''), {
      code: 'ECONNREFUSED',
    });
    expect(isDatabaseUnavailable(aggregate)).toBe(true);
  });

  it.each([
    'timeout exceeded when trying to connect',
    'Connection terminated',
    'Connection terminated unexpectedly',
    'Connection terminated due to connection timeout',
    'Client has encountered a connection error and is not queryable',
  ])('is true for the node-postgres message %j', (message) => {
    expect(isDatabaseUnavailable(new Error(message))).toBe(true);
  });

  it('is true for a TypeORM QueryFailedError wrapping 57P01', () => {
    expect(isDatabaseUnavailable(new QueryFailedErrorLike(pgError('57P01', 'terminating connection due to administrator command')))).toBe(
      true,
    );
    expect(isDatabaseUnavailable({ driverError: { code: '57P01' } })).toBe(true);
  });

  it('is true when the cause chain leads to an unavailable error', () => {
    expect(isDatabaseUnavailable(new Error('boot failed', { cause: socketError('ECONNREFUSED') }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('a', { cause: new Error('b', { cause: new Error('timeout exceeded when trying to connect') }) }))).toBe(
      true,
    );
    expect(isDatabaseUnavailable(new QueryFailedErrorLike(new Error('x', { cause: pgError('08006') })))).toBe(true);
  });

  it('gives up after 5 levels of nesting (no unbounded walk)', () => {
    const nest = (levels: number) => {
      let e: unknown = pgError('57P01');
      for (let i = 0; i < levels; i++) e = new Error(`wrap ${i}`, { cause: e });
      return e;
    };
    expect(isDatabaseUnavailable(nest(4))).toBe(true);
    expect(isDatabaseUnavailable(nest(5))).toBe(false);
  });

  it('terminates on a cyclic cause chain', () => {
    const a: { cause?: unknown; message: string } = { message: 'a' };
    const b = { message: 'b', cause: a };
    a.cause = b;
    expect(isDatabaseUnavailable(a)).toBe(false);
  });

  it.each<[string, unknown]>([
    ['23505 unique_violation', pgError('23505', 'duplicate key value violates unique constraint "orders_pkey"')],
    ['23505 wrapped by TypeORM', new QueryFailedErrorLike(pgError('23505'))],
    ['23514 check_violation', pgError('23514')],
    ['40001 serialization_failure', pgError('40001')],
    ['40P01 deadlock_detected', pgError('40P01')],
    ['57014 query_canceled (statement timeout)', pgError('57014')],
    ['42P01 undefined_table', pgError('42P01')],
    ['a plain Error', new Error('boom')],
    ['a TypeError', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['a message mentioning a connection, not from the pool', new Error('the Connection terminated flag is wrong')],
    ['a numeric code', { code: 8006 }],
    ['an 08 code that is not a string', { code: ['08006'] }],
    ['undefined', undefined],
    ['null', null],
    ['a string', 'ECONNREFUSED'],
    ['a number', 57],
    ['an empty object', {}],
  ])('is false for %s', (_name, error) => {
    expect(isDatabaseUnavailable(error)).toBe(false);
  });
});

describe('sqlState', () => {
  it('reads the code of a node-postgres error', () => {
    expect(sqlState(pgError('23505'))).toBe('23505');
  });

  it('looks through a TypeORM QueryFailedError', () => {
    expect(sqlState(new QueryFailedErrorLike(pgError('40001')))).toBe('40001');
  });

  it("prefers the driver's code over the wrapper's own", () => {
    expect(sqlState(Object.assign(new QueryFailedErrorLike(pgError('23505')), { code: 'WRAPPER' }))).toBe('23505');
  });

  it.each<[string, unknown]>([
    ['undefined', undefined],
    ['null', null],
    ['a plain Error', new Error('x')],
    ['a numeric code', { code: 23505 }],
    ['a driver error without a code', new QueryFailedErrorLike(new Error('x'))],
  ])('is undefined for %s', (_name, error) => {
    expect(sqlState(error)).toBeUndefined();
  });
});

describe('violatedConstraint', () => {
  it('reads the constraint of a node-postgres error', () => {
    expect(violatedConstraint(pgError('23505', 'dup', { constraint: 'orders_pkey' }))).toBe('orders_pkey');
  });

  it('looks through a TypeORM QueryFailedError', () => {
    expect(violatedConstraint(new QueryFailedErrorLike(pgError('23514', 'check', { constraint: 'amount_positive' })))).toBe(
      'amount_positive',
    );
  });

  it("prefers the driver's constraint over the wrapper's own", () => {
    const error = Object.assign(new QueryFailedErrorLike(pgError('23505', 'dup', { constraint: 'inner' })), { constraint: 'outer' });
    expect(violatedConstraint(error)).toBe('inner');
  });

  it.each<[string, unknown]>([
    ['undefined', undefined],
    ['null', null],
    ['a plain Error', new Error('x')],
    ['a 23505 without a constraint name', pgError('23505')],
    ['a non-string constraint', { constraint: 42 }],
  ])('is undefined for %s', (_name, error) => {
    expect(violatedConstraint(error)).toBeUndefined();
  });
});
