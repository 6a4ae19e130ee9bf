import { Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { IdempotencyRecovery } from './idempotency-recovery.service';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { IdempotentRoutes } from '../routes/idempotent-routes';

/**
 * While the recovery job runs, a resumer for every phased route's operation:
 * without one, an operation abandoned at a recovery point would wait for its
 * client's retry forever. Checked at onApplicationBootstrap, after every
 * onModuleInit, so that the @Resumes() methods (ResumersExplorer) and the
 * resume functions an app registers by hand both count.
 */
@Injectable()
export class ResumersCheck implements OnApplicationBootstrap {
  constructor(
    private readonly routes: IdempotentRoutes,
    private readonly recovery: IdempotencyRecovery,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.options.recovery.enabled) return;
    const missing = new Map<string, string[]>();
    for (const { controller, method, options } of this.routes.list) {
      const operation = options.phased;
      if (operation === undefined || this.recovery.hasResumer(operation)) continue;
      missing.set(operation, [...(missing.get(operation) ?? []), `${controller.name}.${method}`]);
    }
    if (missing.size === 0) return;
    const named = [...missing].map(([operation, routes]) => `${operation} (@Idempotent() on ${routes.join(', ')})`).join(', ');
    throw new Error(
      `no resumer for the phased operation${missing.size === 1 ? '' : 's'} ${named}: mark the method that resumes it with @Resumes(), ` +
        'or register one with IdempotencyRecovery.register() in onModuleInit; the recovery job ends what no retry does',
    );
  }
}
