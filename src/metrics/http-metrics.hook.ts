import type { FastifyInstance } from 'fastify';
import { MetricsService } from './metrics.service';

/**
 * Observes every request once its response has finished, labelled by the
 * matched route pattern (`/payments/:id`; `unmatched` for a 404 of no route).
 * A Fastify `onResponse` hook: Fastify times the request from its arrival
 * (`reply.elapsedTime`), so this costs no middleware and no listener of its own.
 */
export function observeHttpRequests(fastify: FastifyInstance, metrics: MetricsService): void {
  fastify.addHook('onResponse', (request, reply, done) => {
    const route = request.is404 ? 'unmatched' : (request.routeOptions.url ?? 'unmatched');
    metrics.httpDuration.observe({ method: request.method, route, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
    done();
  });
}
