import { ExecutionContext, Inject, Injectable, OnModuleInit, Type } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, ModuleRef, Reflector } from '@nestjs/core';
import { parseDuration } from '../config/duration';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions, resolveTiming } from '../config/idempotency.options';
import { IdempotentOptions } from '../config/module-options';
import { IdempotencyStore } from '../contract/idempotency.store';
import { IdempotentReplay } from '../contract/idempotent-replay';
import { RouteSettings } from '../core/route-settings';
import { IdempotencyStores } from '../stores/idempotency-stores';

/** Route metadata of @Idempotent(), read by the interceptor (handler first, then controller). */
export const IdempotentMetadata = Reflector.createDecorator<IdempotentOptions>();

/**
 * The metadata key under which @nestjs/microservices keeps a handler's
 * patterns (its exported PATTERN_METADATA), read by name so that this module
 * never loads that optional package.
 */
const PATTERN_METADATA = 'microservices:pattern';

/** The patterns of a @MessagePattern/@EventPattern handler, undefined for any other method. */
export function messagePatterns(handler: object): unknown[] | undefined {
  const patterns: unknown = Reflect.getMetadata(PATTERN_METADATA, handler);
  return Array.isArray(patterns) ? patterns : undefined;
}

/**
 * An @Idempotent() handler of the app, as found at startup: a route or a
 * message handler of a controller, or a GraphQL resolver's field (a provider).
 */
export interface IdempotentRoute {
  /** The class that declares it: a controller, or a provider (a GraphQL resolver). */
  controller: Type;
  /** Whether the class is a provider (a resolver), not a controller: it has no HTTP route. */
  provider: boolean;
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
    private readonly moduleRef: ModuleRef,
  ) {}

  onModuleInit(): void {
    for (const route of this.list) {
      if (route.provider && route.options.phased !== undefined) {
        throw new Error(`@Idempotent() on ${route.controller.name}.${route.method}: a GraphQL resolver runs in one unit; phased operations are for HTTP routes`);
      }
      if (route.provider && route.options.replay !== undefined) {
        throw new Error(`@Idempotent() on ${route.controller.name}.${route.method}: \`replay\` is for HTTP routes; a GraphQL resolver replays its stored value`);
      }
      this.resolve(route.handler, route.controller, route.options);
    }
  }

  /**
   * Every @Idempotent() handler of the app's controllers and providers (found
   * on first use: Nest's container is complete before init).
   */
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

  /** The settings of a route found at startup (resolved now when asked before init, e.g. by the OpenAPI description). */
  settingsOf(route: IdempotentRoute): RouteSettings {
    return this.settings.get(route.handler) ?? this.resolve(route.handler, route.controller, route.options);
  }

  private discover(): IdempotentRoute[] {
    const found: IdempotentRoute[] = [];
    const controllers = this.discovery.getControllers().map((wrapper) => ({ wrapper, provider: false }));
    // A GraphQL resolver is a provider; a request-scoped one has no instance here and is resolved on its first request.
    const providers = this.discovery.getProviders().map((wrapper) => ({ wrapper, provider: true }));
    for (const {
      wrapper: { metatype, instance },
      provider,
    } of [...controllers, ...providers]) {
      if (!metatype || !instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as Record<string, unknown>;
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const handler = prototype[method] as (...args: unknown[]) => unknown;
        const options = this.reflector.getAllAndOverride(IdempotentMetadata, [handler, metatype]);
        if (!options) continue;
        const onClass = this.reflector.get(IdempotentMetadata, handler) === undefined;
        found.push({ controller: metatype as Type, provider, method, handler, options, onClass });
      }
    }
    return found;
  }

  private resolve(handler: (...args: unknown[]) => unknown, controller: Type, o: IdempotentOptions): RouteSettings {
    const where = `@Idempotent() on ${controller.name}.${handler.name}`;
    if (o.phased !== undefined && messagePatterns(handler) !== undefined) {
      throw new Error(`${where}: a message handler runs in one unit; phased operations are for HTTP routes`);
    }
    if (o.replay !== undefined && messagePatterns(handler) !== undefined) {
      throw new Error(`${where}: \`replay\` is for HTTP routes; a message handler replays its stored value`);
    }
    if (o.replay !== undefined && o.phased !== undefined) {
      throw new Error(`${where}: \`replay\` is not for phased routes (their last phase stores the answer)`);
    }
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
      replay: o.replay && this.replayProvider(o.replay, where),
      key: o.key,
      messageScope: o.messageScope,
      store,
      oneCommit: this.stores.oneCommitOf(o, store),
    };
    this.settings.set(handler, settings);
    return settings;
  }

  /** The app's instance of a route's `replay` provider; none stops the app, saying how to register it. */
  private replayProvider(type: Type<IdempotentReplay>, where: string): IdempotentReplay {
    let found: IdempotentReplay | undefined;
    try {
      found = this.moduleRef.get(type, { strict: false });
    } catch {
      found = undefined;
    }
    if (!found) throw new Error(`${where}: its \`replay\`, ${type.name}, is not a provider of the app: add it to the providers of a module`);
    return found;
  }
}
