import { DynamicModule, Module } from '@nestjs/common';
import { DestinationStream, LevelWithSilent, Logger, pino } from 'pino';
import { AppLogger } from './app.logger';
import { LOG_DESTINATION, ROOT_LOGGER } from './logging.constants';

/**
 * The app's one pino logger (ROOT_LOGGER), and AppLogger, the Nest logger that
 * writes through it. Request lines are written by logRequests (request-log.hook.ts),
 * which configureApp adds to Fastify.
 */
@Module({})
export class LoggingModule {
  static forRoot(options: { level: LevelWithSilent }): DynamicModule {
    return {
      module: LoggingModule,
      providers: [
        // pino's own default (stdout); a test overrides it to read the lines.
        { provide: LOG_DESTINATION, useValue: null },
        {
          provide: ROOT_LOGGER,
          inject: [LOG_DESTINATION],
          useFactory: (destination: DestinationStream | null): Logger =>
            // No header is censored here: a request line shows only the headers of an allow-list
            // (LOGGED_REQUEST_HEADERS), so Authorization, Cookie and the like are never in it.
            pino({ level: options.level }, destination ?? undefined),
        },
        AppLogger,
      ],
      exports: [ROOT_LOGGER, AppLogger],
    };
  }
}
