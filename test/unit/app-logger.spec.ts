import { AsyncLocalStorage } from 'node:async_hooks';
import { CLS_REQ, ClsService } from 'nestjs-cls';
import { pino } from 'pino';
import { AppLogger } from '../../src/logging/app.logger';

/** AppLogger keeps Nest's logger contract on pino lines, and looks the request id up only for a line it writes. */
describe('AppLogger', () => {
  let lines: Record<string, unknown>[];
  let cls: ClsService;
  let logger: AppLogger;
  beforeEach(() => {
    lines = [];
    cls = new ClsService(new AsyncLocalStorage());
    logger = new AppLogger(pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }), cls);
  });

  it('writes the context (Nest passes it last), format arguments, and an object message merged into the line', () => {
    logger.log('%d keys purged', 3, 'Purge');
    logger.warn({ address: '10.0.0.1' }, 'failed authentication', 'Auth');
    expect(lines).toEqual([
      expect.objectContaining({ level: 30, context: 'Purge', msg: '3 keys purged' }),
      expect.objectContaining({ level: 40, context: 'Auth', address: '10.0.0.1', msg: 'failed authentication' }),
    ]);
  });

  it('writes an error given as an Error, or as Nest’s exception handlers give it (message, stack, context), as err with its stack', () => {
    logger.error(new Error('first'), 'Errors');
    logger.error('second', 'Error: second\n    at handler (app.js:1:1)', 'ExceptionsHandler');
    expect(lines[0]).toMatchObject({ level: 50, context: 'Errors', err: { type: 'Error', message: 'first' } });
    expect(lines[1]).toMatchObject({ level: 50, context: 'ExceptionsHandler', err: { message: 'second', stack: 'Error: second\n    at handler (app.js:1:1)' } });
  });

  it('adds the request id inside a request’s context, and looks it up only for a line it writes', () => {
    const lookup = jest.spyOn(cls, 'get');
    cls.run(() => {
      cls.set(CLS_REQ, { id: 'req-7' });
      logger.debug('below the level');
      expect(lookup).not.toHaveBeenCalled();
      logger.warn('inside', 'Payments');
    });
    logger.warn('outside', 'Payments');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ reqId: 'req-7', context: 'Payments', msg: 'inside' });
    expect(lines[1]).not.toHaveProperty('reqId');
  });
});
