/** The app's pino logger: every line, Nest's and the request lines, goes through it. */
export const ROOT_LOGGER = Symbol('ROOT_LOGGER');
/** Where ROOT_LOGGER writes: null for pino's default (stdout). */
export const LOG_DESTINATION = Symbol('LOG_DESTINATION');
