import { Inject, Injectable } from '@nestjs/common';
import { ClsService } from 'nestjs-cls';
import { IDEMPOTENCY_CLS } from '../config/idempotency.options';

const CURRENT_KEY = Symbol('idempotency.current-key');
const CURRENT_OPERATION = Symbol('idempotency.current-operation');

/**
 * The Idempotency-Key of the request being executed, for code that passes it on
 * to an external system with its own idempotency (a card network, a provider's
 * API), so that a retry after a lost lease cannot charge twice there either.
 */
@Injectable()
export class IdempotencyContext {
  constructor(@Inject(IDEMPOTENCY_CLS) private readonly cls: ClsService) {}

  /** The normalised key of the current @Idempotent() execution, if any. */
  get key(): string | undefined {
    return this.cls.isActive() ? this.cls.get<string | undefined>(CURRENT_KEY) : undefined;
  }

  /** @internal The operation (route) of the current execution, for the module's own errors. */
  get operation(): string | undefined {
    return this.cls.isActive() ? this.cls.get<string | undefined>(CURRENT_OPERATION) : undefined;
  }

  /** @internal Set by the interceptor once the key is claimed. */
  enter(key: string, operation: string): void {
    if (!this.cls.isActive()) return;
    this.cls.set(CURRENT_KEY, key);
    this.cls.set(CURRENT_OPERATION, operation);
  }
}
