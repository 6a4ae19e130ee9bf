import { Reflector } from '@nestjs/core';
import type { PhasedOperation } from '../core/phased-operation';
import type { PhasedOperationName } from '../core/phased-operation-name';

/** @internal The metadata of @Resumes(): the name of the operation the method resumes. */
export const ResumesMetadata = Reflector.createDecorator<string>();

/** A method that drives a phased operation on from its recovery point to finish() or release(). */
type Resumer<S> = (operation: PhasedOperation<S>) => Promise<unknown>;

/** @Resumes() on a method whose first parameter takes the operation with its state. */
export type ResumesDecorator<S> = <M extends Resumer<S>>(target: object, method: string | symbol, descriptor: TypedPropertyDescriptor<M>) => void;

/**
 * Marks the provider method that resumes a phased operation when no request
 * does (the recovery job): ResumersExplorer finds it at startup and registers it
 * with IdempotencyRecovery, as `@Cron()` methods are found by @nestjs/schedule.
 * One resumer per operation (a second fails the startup), on a singleton
 * provider or controller. Given a phasedOperation() name, the method's
 * parameter must take that operation's state; given a plain string, an untyped
 * PhasedOperation.
 */
export function Resumes<S>(operation: PhasedOperationName<S>): ResumesDecorator<S>;
export function Resumes(operation: string): ResumesDecorator<unknown>;
export function Resumes(operation: string): ResumesDecorator<unknown> {
  const metadata = ResumesMetadata(operation);
  return (target, method, descriptor) => {
    metadata(target, method, descriptor);
  };
}
