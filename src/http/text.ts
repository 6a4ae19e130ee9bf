import { ValidationOptions, registerDecorator } from 'class-validator';

/**
 * Free text a client sends (descriptions, SKUs) is stored, logged and shown back
 * to people: a control character there forges log lines, breaks terminals and
 * CSV exports, and PostgreSQL refuses U+0000 outright (a 500 if it got that far).
 * C0, DEL, C1 and the Unicode line/paragraph separators are refused.
 */
// eslint-disable-next-line no-control-regex -- the control characters are what this refuses
export const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

export function hasNoControlCharacters(value: unknown): boolean {
  return typeof value === 'string' && !CONTROL_CHARACTER.test(value);
}

/** Validates a string free of control characters (see CONTROL_CHARACTER). */
export function NoControlCharacters(options?: ValidationOptions): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'noControlCharacters',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: '$property must not contain control characters', ...options },
      validator: { validate: (value: unknown) => hasNoControlCharacters(value) },
    });
}
