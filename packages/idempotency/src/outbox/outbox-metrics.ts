import { Inject, Injectable } from '@nestjs/common';
import { Counter, Histogram, Registry } from 'prom-client';
import { IDEMPOTENCY_REGISTRY } from '../config/idempotency.options';

/** What a delivery attempt came to. */
export type OutboxDeliveryResult = 'delivered' | 'failed' | 'dead';

/** The outbox's metrics, on the module's registry. */
@Injectable()
export class OutboxMetrics {
  readonly deliveries: Counter<'result'>;
  readonly publishDuration: Histogram;
  readonly purged: Counter;

  constructor(@Inject(IDEMPOTENCY_REGISTRY) registry: Registry) {
    const registers = [registry];
    this.deliveries = new Counter({
      name: 'idempotency_outbox_deliveries_total',
      help: 'Outbox delivery attempts by result (delivered; failed: retried later; dead: failed past the horizon, parked)',
      labelNames: ['result'],
      registers,
    });
    this.publishDuration = new Histogram({
      name: 'idempotency_outbox_publish_duration_seconds',
      help: 'Duration of the publisher call of each delivery attempt',
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers,
    });
    this.purged = new Counter({ name: 'idempotency_purge_deleted_outbox_total', help: 'Delivered outbox messages past their retention deleted by the purge job', registers });
  }
}
