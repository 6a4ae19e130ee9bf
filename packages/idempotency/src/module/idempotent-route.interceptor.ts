import { CallHandler, ExecutionContext, Injectable, NestInterceptor, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { Observable } from 'rxjs';
import { IdempotencyInterceptor } from '../http/idempotency.interceptor';

/**
 * What `@Idempotent()` puts on a route: it injects only ModuleRef, so the
 * controller's module compiles without IdempotencyModule (Nest's standard unit
 * test of a controller, `Test.createTestingModule({ controllers }).compile()`,
 * which calls methods directly and runs no interceptor), and hands every call
 * to IdempotencyModule's interceptor. An app without the module never serves a
 * request unprotected: its startup (`app.init()`, `listen()`) stops here, and
 * so would any request.
 */
@Injectable()
export class IdempotentRouteInterceptor implements NestInterceptor, OnModuleInit {
  private interceptor?: IdempotencyInterceptor;

  constructor(private readonly moduleRef: ModuleRef) {}

  onModuleInit(): void {
    this.resolve();
  }

  intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    return this.resolve().intercept(context, next);
  }

  private resolve(): IdempotencyInterceptor {
    if (this.interceptor) return this.interceptor;
    let found: IdempotencyInterceptor | undefined;
    try {
      found = this.moduleRef.get(IdempotencyInterceptor, { strict: false });
    } catch {
      found = undefined;
    }
    if (!found) {
      throw new Error(
        '@Idempotent() routes need IdempotencyModule: import IdempotencyModule.forRoot({ ... }) (or forRootAsync) in the root module. ' +
          "(A unit test that compiles a testing module and calls a controller's methods directly needs nothing.)",
      );
    }
    this.interceptor = found;
    return found;
  }
}
