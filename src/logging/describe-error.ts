/**
 * What a log line says of an error: its class, code, message, constraint and
 * stack, never the whole object. A TypeORM QueryFailedError carries the SQL's
 * `parameters` and pg's `detail` ("Key (email)=(...) already exists"): client
 * data that must not reach the logs.
 */
export function describeForLog(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { class: typeof error, message: 'a non-Error value was thrown' };
  const e = error as Error & { code?: unknown; constraint?: unknown; driverError?: { code?: unknown; constraint?: unknown } };
  const code = e.code ?? e.driverError?.code;
  const constraint = e.constraint ?? e.driverError?.constraint;
  return {
    class: e.constructor?.name ?? e.name,
    message: e.message,
    ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
    ...(typeof constraint === 'string' ? { constraint } : {}),
    stack: e.stack,
  };
}
