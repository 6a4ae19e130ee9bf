import { ValidationError, ValidationPipe } from '@nestjs/common';
import { problems } from './problem';

function flatten(errors: ValidationError[], parent = ''): { field: string; messages: string[] }[] {
  return errors.flatMap((error) => {
    const field = parent ? (/^\d+$/.test(error.property) ? `${parent}[${error.property}]` : `${parent}.${error.property}`) : error.property;
    const own = error.constraints ? [{ field, messages: Object.values(error.constraints) }] : [];
    return [...own, ...flatten(error.children ?? [], field)];
  });
}

/**
 * Unknown fields, wrong types and out-of-range values are a 400
 * `validation_failed` that lists every failing field. Pipes run inside the
 * idempotency interceptor, so a validation error releases the key: a corrected
 * retry with the same key runs.
 */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    exceptionFactory: (errors) => problems.validationFailed(flatten(errors)),
  });
}
