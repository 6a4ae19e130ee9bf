import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { IDEMPOTENCY_OPTIONS, IdempotencyStoreKind, IdempotentMetadata, IdempotentOptions, ResolvedIdempotencyOptions } from './idempotency.options';

/**
 * The honest boundary of the Redis store, enforced at startup rather than on a
 * request: every @Idempotent() route of the app is found (Nest's
 * DiscoveryService and MetadataScanner, the route metadata through the
 * Reflector) and one asking Redis for what only PostgreSQL can do stops the
 * app with one line saying why. Phased operations commit their recovery points
 * with the key in their phases' transactions; waiting duplicates are woken by
 * PostgreSQL's LISTEN/NOTIFY.
 */
@Injectable()
export class IdempotencyRoutesCheck implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  onModuleInit(): void {
    for (const wrapper of this.discovery.getControllers()) {
      const { metatype, instance } = wrapper;
      if (!metatype || !instance) continue;
      const prototype = Object.getPrototypeOf(instance) as Record<string, unknown>;
      for (const name of this.scanner.getAllMethodNames(prototype)) {
        const handler = prototype[name] as (...args: unknown[]) => unknown;
        const options = this.reflector.getAllAndOverride(IdempotentMetadata, [handler, metatype]);
        if (!options) continue;
        const problem = routeProblem(options, this.options);
        if (problem) throw new Error(`@Idempotent() on ${metatype.name}.${name}: ${problem}`);
      }
    }
  }
}

/** Why a route's options cannot work with the module's stores; undefined when they can. */
export function routeProblem(route: IdempotentOptions, module: Pick<ResolvedIdempotencyOptions, 'store' | 'redis'>): string | undefined {
  const store: IdempotencyStoreKind = route.store ?? module.store;
  if (store !== 'redis') return undefined;
  if (!module.redis) return "store 'redis' needs IdempotencyModule's redis option ({ url } or { client })";
  if (route.phased !== undefined) {
    return "phased operations need the PostgreSQL store (their recovery points commit with the key in each phase's transaction); use store 'postgres'";
  }
  if (route.wait !== undefined) return "wait needs the PostgreSQL store (duplicates are woken by LISTEN/NOTIFY); drop wait or use store 'postgres'";
  return undefined;
}
