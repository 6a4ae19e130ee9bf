import { Logger } from '@nestjs/common';

/**
 * A route's wiring mistake, logged with its fix once per route and kind (the
 * first request that meets it), not once per request: the client's answer
 * names no internals, the server's log names the route and the fix.
 */
export class RouteWarnings {
  private readonly logger = new Logger('IdempotencyModule');
  private readonly logged = new Set<string>();

  once(kind: string, route: string, message: string): void {
    const id = `${kind}\0${route}`;
    if (this.logged.has(id)) return;
    this.logged.add(id);
    this.logger.error(`${route}: ${message} (logged once per route)`);
  }
}
