import { Inject, Injectable, LoggerService } from '@nestjs/common';
import { CLS_REQ, ClsService } from 'nestjs-cls';
import type { Level, Logger } from 'pino';
import { ROOT_LOGGER } from './logging.constants';

type Write = (...args: unknown[]) => void;

/**
 * Nest's logger (`app.useLogger`): every `new Logger(context)` of the app, and
 * Nest's own messages, become JSON lines of ROOT_LOGGER, with `context` and,
 * inside a request, its `reqId`. The id is the one of the request nestjs-cls
 * keeps in its context (its middleware already runs one AsyncLocalStorage
 * context per request): it is looked up only when a line is written, so a
 * request costs no child logger and no context of its own.
 */
@Injectable()
export class AppLogger implements LoggerService {
  constructor(
    @Inject(ROOT_LOGGER) private readonly logger: Logger,
    private readonly cls: ClsService,
  ) {}

  verbose(message: unknown, ...params: unknown[]): void {
    this.write('trace', message, params);
  }
  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params);
  }
  log(message: unknown, ...params: unknown[]): void {
    this.write('info', message, params);
  }
  warn(message: unknown, ...params: unknown[]): void {
    this.write('warn', message, params);
  }
  error(message: unknown, ...params: unknown[]): void {
    this.write('error', message, params);
  }
  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params);
  }

  /**
   * Nest's contract: `logger.warn(message, ...args, context)`, the context last
   * (Logger instances add theirs); an object message is merged into the line
   * (an Error becomes `err`); `error(message, stack, context)` is an error.
   */
  private write(level: Level, message: unknown, params: unknown[]): void {
    if (!this.logger.isLevelEnabled(level)) return;
    const fields: Record<string, unknown> = {};
    const reqId = this.cls.get<{ id?: unknown } | undefined>(CLS_REQ)?.id;
    if (reqId !== undefined) fields.reqId = reqId;
    const args = params.slice(0, -1);
    if (params.length) fields.context = params[params.length - 1];
    const log = (this.logger[level] as Write).bind(this.logger);
    if (typeof message === 'object' && message !== null) {
      if (message instanceof Error) fields.err = message;
      else Object.assign(fields, message);
      log(fields, ...args);
    } else if (level === 'error' && typeof message === 'string' && args.length === 1 && typeof args[0] === 'string' && /\n\s*at /.test(args[0])) {
      // Nest's exception handlers: error(message, stack).
      fields.err = Object.assign(new Error(message), { stack: args[0] });
      log(fields);
    } else {
      log(fields, message, ...args);
    }
  }
}
