import { Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { IdempotencyRecovery } from './idempotency-recovery.service';
import { PhasedOperation } from '../core/phased-operation';
import { ResumesMetadata } from './resumes.decorator';

type Wrapper = ReturnType<DiscoveryService['getProviders']>[number];

/**
 * Finds the @Resumes() methods of the app's providers and controllers at
 * startup (Nest's DiscoveryService and MetadataScanner, the metadata through
 * the Reflector, as @nestjs/schedule finds @Cron() methods) and registers each
 * with IdempotencyRecovery under its operation's name. An operation with two
 * resumers, or a resumer on a provider that is not a singleton (the recovery
 * job has no request to build one for), stops the startup with one line
 * saying where. The module is global, so this runs before the app's own
 * onModuleInit hooks; a resumer an app registers by hand there meets these.
 */
@Injectable()
export class ResumersExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly recovery: IdempotencyRecovery,
  ) {}

  onModuleInit(): void {
    // Where each operation's resumer was found, for the message about a second one.
    const found = new Map<string, string>();
    // An alias (useExisting) shows the same instance again.
    const seen = new Set<object>();
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      const instance: unknown = wrapper.instance;
      if (wrapper.isAlias || typeof instance !== 'object' || instance === null || seen.has(instance)) continue;
      seen.add(instance);
      for (const { method, operation } of this.resumersOf(instance)) {
        const where = `${instance.constructor.name}.${method}`;
        if (wrapper.isTransient || !wrapper.isDependencyTreeStatic()) {
          throw new Error(`@Resumes(${operation}) on ${where}: ${scopeOf(wrapper)} provider; the recovery job calls one instance, with no request, so a resumer lives on a singleton`);
        }
        const other = found.get(operation);
        if (other) throw new Error(`two resumers for the phased operation ${operation}: ${other} and ${where}; an operation has one`);
        found.set(operation, where);
        const resume = (instance as Record<string, (operation: PhasedOperation) => Promise<unknown>>)[method];
        this.recovery.register(operation, (op) => resume.call(instance, op));
      }
    }
  }

  private resumersOf(instance: object): { method: string; operation: string }[] {
    const prototype = Object.getPrototypeOf(instance) as Record<string, unknown> | null;
    if (!prototype) return [];
    const resumers: { method: string; operation: string }[] = [];
    for (const method of this.scanner.getAllMethodNames(prototype)) {
      const operation = this.reflector.get(ResumesMetadata, prototype[method] as () => unknown);
      if (operation !== undefined) resumers.push({ method, operation });
    }
    return resumers;
  }
}

function scopeOf(wrapper: Wrapper): string {
  return wrapper.isTransient ? 'a transient' : 'a request-scoped (or request-dependent)';
}
