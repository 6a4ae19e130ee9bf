import { Counter, Gauge } from 'prom-client';
import type { ConnectionEvents, ConnectionTable } from '../http/connection-fairness';
import { MetricsService } from './metrics.service';

/**
 * The HTTP server's connections on /metrics: how many are open and the cap,
 * the idle ones closed to make room and the new ones refused, and the share of
 * the untrusted address holding the most. A share above one half that lasts is
 * a load balancer or proxy missing from HTTP_TRUST_PROXY: every client behind
 * it then shares one address's budgets (see untrusted-proxy.warning.ts).
 */
export function connectionMetrics(metrics: MetricsService): { events: Required<Pick<ConnectionEvents, 'evicted' | 'refused'>>; observe(table: ConnectionTable): void } {
  const registers = [metrics.registry];
  const evicted = new Counter({
    name: 'http_connections_evicted_total',
    help: 'Idle connections closed to make room for a new one at the cap',
    registers,
  });
  const refused = new Counter({
    name: 'http_connections_refused_total',
    help: 'New connections closed at once at the cap (every connection they could replace was serving a request)',
    registers,
  });
  return {
    events: { evicted: () => evicted.inc(), refused: () => refused.inc() },
    observe: (table) => {
      new Gauge({
        name: 'http_connections_open',
        help: 'Connections the HTTP server holds open',
        registers,
        collect(this: Gauge) {
          this.set(table.open());
        },
      });
      new Gauge({
        name: 'http_connections_limit',
        help: 'Connections the HTTP server holds at most (the smaller of the caps by descriptors and by memory)',
        registers,
        collect(this: Gauge) {
          this.set(table.total);
        },
      });
      new Gauge({
        name: 'http_connections_largest_untrusted_share',
        help: 'Share of the open connections held by the one address, not in HTTP_TRUST_PROXY, that holds the most (above 0.5: a proxy to declare?)',
        registers,
        collect(this: Gauge) {
          const open = table.open();
          this.set(open === 0 ? 0 : (table.largestUntrusted()?.held ?? 0) / open);
        },
      });
    },
  };
}
