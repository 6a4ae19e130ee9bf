import { ExecutionContext, Inject, Injectable, OnModuleInit, Type } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { parseDuration } from './duration';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions, resolveTiming } from './idempotency.options';
import { IdempotentOptions } from './module-options';
import { IdempotencyStore, OneCommitKeys } from './idempotency.store';
import { IdempotencyStores } from './idempotency-stores';

/** Route metadata of @Idempotent(), read by the interceptor (handler first, then controller). */
export const IdempotentMetadata = Reflector.createDecorator<IdempotentOptions>();

/** How the interceptor runs a route: its options resolved against the module's, and its store. */
export interface RouteSettings {
  required: boolean;
  /** The operation name of a phased route (see PhasedOperation). */
  phased?: string;
  /** What spans and events call it: the phased name, else `Controller.handler`. */
  operation: string;
  /** How long a duplicate waits for the owner to finish (0: answer 409 at once). */
  waitMs: number;
  leaseMs: number;
  retentionMs: number;
  fingerprint?: IdempotentOptions['fingerprint'];
  /** Where its keys are kept; it has every optional part the route needs. */
  store: IdempotencyStore;
  /** Present when the route commits once (`commit: 'one'`): its key is claimed inside its transaction (OneCommitRun). */
  oneCommit?: OneCommitKeys;
}

/** An @Idempotent() route of the app, as found at startup. */
export interface IdempotentRoute {
  controller: Type;
  method: string;
  handler: (...args: unknown[]) => unknown;
  options: IdempotentOptions;
  /** Whether the options are the controller's (`@Idempotent()` on the class). */
  onClass: boolean;
}

/**
 * Every @Idempotent() route, resolved once. At startup each route of the app
 * is found (Nest's DiscoveryService and MetadataScanner, the route metadata
 * through the Reflector) and resolved, so one that cannot work (a store it
 * names that the module has not, or one without what it asks for: phases,
 * waiting, one commit) stops the app with one line saying why, rather than failing a
 * request. The interceptor reads each route's settings from here.
 */
@Injectable()
export class IdempotentRoutes implements OnModuleInit {
  private readonly settings = new WeakMap<object, RouteSettings>();
  private found?: IdempotentRoute[];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly stores: IdempotencyStores,
  ) {}

  onModuleInit(): void {
    for (const route of this.list) this.resolve(route.handler, route.controller, route.options);
  }

  /** Every @Idempotent() route of the app's controllers (found on first use: Nest's container is complete before init). */
  get list(): readonly IdempotentRoute[] {
    this.found ??= this.discover();
    return this.found;
  }

  /** The settings of the route `context` runs (resolved now when startup could not see it). */
  of(context: ExecutionContext): RouteSettings {
    const handler = context.getHandler() as (...args: unknown[]) => unknown;
    const controller = context.getClass();
    return this.settings.get(handler) ?? this.resolve(handler, controller, this.reflector.getAllAndOverride(IdempotentMetadata, [handler, controller]) ?? {});
  }

  private discover(): IdempotentRoute[] {
    const found: IdempotentRoute[] = [];
    for (const { metatype, instance } of this.discovery.getControllers()) {
      if (!metatype || !instance) continue;
      const prototype = Object.getPrototypeOf(instance) as Record<string, unknown>;
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const handler = prototype[method] as (...args: unknown[]) => unknown;
        const options = this.reflector.getAllAndOverride(IdempotentMetadata, [handler, metatype]);
        if (!options) continue;
        const onClass = this.reflector.get(IdempotentMetadata, handler) === undefined;
        found.push({ controller: metatype as Type, method, handler, options, onClass });
      }
    }
    return found;
  }

  private resolve(handler: (...args: unknown[]) => unknown, controller: Type, o: IdempotentOptions): RouteSettings {
    const where = `@Idempotent() on ${controller.name}.${handler.name}`;
    let store: IdempotencyStore;
    try {
      store = this.stores.forRoute(o);
    } catch (error) {
      throw new Error(`${where}: ${(error as Error).message}`, { cause: error });
    }
    const settings: RouteSettings = {
      required: o.required ?? true,
      phased: o.phased,
      operation: o.phased ?? `${controller.name}.${handler.name}`,
      waitMs: o.wait === undefined ? 0 : parseDuration(o.wait),
      ...resolveTiming(o, this.options, where),
      fingerprint: o.fingerprint,
      store,
      oneCommit: this.stores.oneCommitOf(o, store),
    };
    this.settings.set(handler, settings);
    return settings;
  }
}
