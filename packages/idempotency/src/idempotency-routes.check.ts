import { Inject, Injectable, OnApplicationBootstrap, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { IdempotencyRecovery } from './idempotency-recovery.service';
import { IDEMPOTENCY_OPTIONS, IdempotencyStoreKind, IdempotentMetadata, IdempotentOptions, ResolvedIdempotencyOptions } from './idempotency.options';

/**
 * The honest boundary of the Redis store, enforced at startup rather than on a
 * request: every @Idempotent() route of the app is found (Nest's
 * DiscoveryService and MetadataScanner, the route metadata through the
 * Reflector) and one asking Redis for what only PostgreSQL can do stops the
 * app with one line saying why. Phased operations commit their recovery points
 * with the key in their phases' transactions; waiting duplicates are woken by
 * PostgreSQL's LISTEN/NOTIFY.
 *
 * And, while the recovery job runs, a resumer for every phased route's
 * operation: without one, an operation abandoned at a recovery point would
 * wait for its client's retry forever. Checked at onApplicationBootstrap,
 * after every onModuleInit, so that the @Resumes() methods (ResumersExplorer)
 * and the resume functions an app registers by hand both count.
 */
@Injectable()
export class IdempotencyRoutesCheck implements OnModuleInit, OnApplicationBootstrap {
  /** The phased routes, as `Controller.handler`, with their operation's name. */
  private readonly phased: { route: string; operation: string }[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly recovery: IdempotencyRecovery,
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
        const route = `${metatype.name}.${name}`;
        const problem = routeProblem(options, this.options);
        if (problem) throw new Error(`@Idempotent() on ${route}: ${problem}`);
        if (options.phased !== undefined) this.phased.push({ route, operation: options.phased });
      }
    }
  }

  onApplicationBootstrap(): void {
    if (!this.options.recovery.enabled) return;
    const missing = new Map<string, string[]>();
    for (const { route, operation } of this.phased) {
      if (!this.recovery.hasResumer(operation)) missing.set(operation, [...(missing.get(operation) ?? []), route]);
    }
    if (missing.size === 0) return;
    const named = [...missing].map(([operation, routes]) => `${operation} (@Idempotent() on ${routes.join(', ')})`).join(', ');
    throw new Error(
      `no resumer for the phased operation${missing.size === 1 ? '' : 's'} ${named}: mark the method that resumes it with @Resumes(), ` +
        'or register one with IdempotencyRecovery.register() in onModuleInit; the recovery job ends what no retry does',
    );
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
