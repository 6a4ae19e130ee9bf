/**
 * @safe-retries/dev-postgres: a real PostgreSQL for development, tests and
 * benchmarks. Never a production dependency: the app loads it only in its
 * development mode (no DATABASE_URL, not in production).
 */
export { startPostgres } from './start';
export type { StartOptions } from './start';
export type { DevPostgres, Replica } from './cluster';
export { PostgresBusyError } from './ownership';
export { PostgresSetupError, postgresOsUser } from './os-user';
export type { OsUser } from './os-user';
export { binDirOnPath } from './binaries';
export { freePort } from './free-port';
