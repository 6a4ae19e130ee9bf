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
            pino(
              {
                level: options.level,
                // Secrets never reach the log: the API key is in this header. pino censors the
                // paths when it writes a line, so a line that is not written costs nothing.
                redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
              },
              destination ?? undefined,
            ),
        },
        AppLogger,
      ],
      exports: [ROOT_LOGGER, AppLogger],
    };
  }
}
