import { DynamicModule, Global, Module } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import { AppConfig } from './config';

/** Injection token of the typed, validated configuration. */
export const APP_CONFIG = Symbol('APP_CONFIG');

/**
 * The configuration is parsed once, before the app is built (main.ts needs it to
 * start the database), and handed in here. `@nestjs/config`'s ConfigService
 * serves the same object for libraries that expect it; our code injects
 * `APP_CONFIG` for a typed accessor.
 */
@Global()
@Module({})
export class AppConfigModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppConfigModule,
      imports: [ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => ({ ...config })] })],
      providers: [{ provide: APP_CONFIG, useValue: config }],
      exports: [APP_CONFIG],
    };
  }
}
