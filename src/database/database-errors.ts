import { QueryRunnerProviderAlreadyReleasedError } from 'typeorm';

/**
 * Tells "the database is unreachable" (a 503 the client should retry) from
 * every other failure (a 500). Judged by SQLSTATE class and socket error codes;
 * node-postgres's pool reports its connect timeout and a dropped connection only
 * as plain Errors, so those are recognised here and nowhere else.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '53000']);
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const POOL_MESSAGES = [
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Connection terminated',
  'Client has encountered a connection error',
  'Connection terminated unexpectedly',
];

export function isDatabaseUnavailable(error: unknown): boolean {
  // TypeORM releases a transaction's query runner when its connection dies; the
  // transaction's next statement then fails with this error, not a socket error.
  if (error instanceof QueryRunnerProviderAlreadyReleasedError) return true;
  for (let e: unknown = error, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const { code, message, driverError, cause } = e as {
      code?: unknown;
      message?: unknown;
      driverError?: unknown;
      cause?: unknown;
    };
    if (typeof code === 'string' && (code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code) || SOCKET_CODES.has(code))) {
      return true;
    }
    if (typeof message === 'string' && POOL_MESSAGES.some((m) => message.startsWith(m))) return true;
    e = driverError ?? cause;
  }
  return false;
}

/** The SQLSTATE of a failed query, looking through TypeORM's QueryFailedError. */
export function sqlState(error: unknown): string | undefined {
  const e = error as { code?: unknown; driverError?: { code?: unknown } } | undefined;
  const code = e?.driverError?.code ?? e?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The constraint a failed query violated (23505 unique, 23514 check, ...). */
export function violatedConstraint(error: unknown): string | undefined {
  const e = error as { constraint?: unknown; driverError?: { constraint?: unknown } } | undefined;
  const name = e?.driverError?.constraint ?? e?.constraint;
  return typeof name === 'string' ? name : undefined;
}
