import { ExecutionContext, SetMetadata } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyRequest } from 'fastify';

/*
 * How a route is reached, declared once where the route lives (health, metrics,
 * the webhooks) and enforced by auth (Authentication, once per request): the
 * declaration needs nothing of auth, so a feature that declares it imports
 * nothing of auth.
 */

/**
 * How a route that needs no API key is reached, as its Fastify route config
 * `access` says (the one declaration: the hooks that run before the body is
 * read and the guards read it from the request):
 *
 * - `public`: anyone (health, the docs). Never blocked or counted by the
 *   failed-auth limit.
 * - `signed`: the request is authenticated by a signature over its exact body
 *   (the card network's webhooks). Never blocked or counted by the failed-auth
 *   limit; the route keeps its body raw (`request.rawBody`), unparsed, holds
 *   it to `maxBodyBytes`, and has a budget of bad signatures of its own.
 * - `metrics-token`: the metrics token opens it; a wrong or missing one is a
 *   failed authentication of the address.
 *
 * A route without `access` needs an API key, checked before its body is read
 * (Authentication).
 */
export type RouteAccess = 'public' | 'signed' | 'metrics-token';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** How the route is reached without an API key (see RouteAccess); absent: it needs one. */
    access?: RouteAccess;
    /** The largest body the route accepts (configureApp makes it the route's bodyLimit). */
    maxBodyBytes?: number;
  }
  interface FastifyRequest {
    /** The exact bytes of a `signed` route's body, kept unparsed for the signature. */
    rawBody?: Buffer;
  }
}

/**
 * A route decorator, never a controller's: Nest's Fastify adapter reads route
 * config from the handler only, so a controller-wide mark would be silently
 * ignored.
 */
function routeWithoutApiKey(access: RouteAccess, extra: { maxBodyBytes?: number } = {}): MethodDecorator {
  const decorator = RouteConfig({ access, ...extra });
  return (target, key, descriptor) => {
    if (descriptor === undefined) throw new Error(`@${access} access is declared on a route handler, not on a controller`);
    decorator(target, key, descriptor);
  };
}

/** Marks a route that anyone may call, with no API key (health). */
export const Public = (): MethodDecorator => routeWithoutApiKey('public');

/** Marks a route opened by the metrics token instead of an API key. */
export const MetricsTokenRoute = (): MethodDecorator => routeWithoutApiKey('metrics-token');

/** Marks a route authenticated by a signature over its body, which is kept raw and held to `maxBodyBytes`. */
export const SignedRoute = (maxBodyBytes: number): MethodDecorator => routeWithoutApiKey('signed', { maxBodyBytes });

/** The access of a request's route; undefined: it needs an API key (so does a path no route matches). */
export function routeAccess(request: FastifyRequest): RouteAccess | undefined {
  return request.routeOptions.config?.access;
}

/**
 * A browser's CORS preflight: an OPTIONS request with
 * Access-Control-Request-Method, which by the Fetch standard never carries
 * credentials. It is answered by the CORS plugin (or 404 when CORS is off)
 * without a key.
 */
export function isCorsPreflight(request: FastifyRequest): boolean {
  return request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined;
}

const REDELIVERY = 'auth:redelivery';

/**
 * The hourly budget of redeliveries per API client (per instance, like the
 * per-second budget): a redelivery queues the event again for every endpoint
 * subscribed to it, so it costs up to 16 deliveries.
 */
export const REDELIVERIES_PER_HOUR = 100;

/** Marks a route that queues deliveries again: counted against REDELIVERIES_PER_HOUR (auth's throttler). */
export const RedeliveryRoute = (): MethodDecorator => SetMetadata(REDELIVERY, true);

/** Whether the route is a RedeliveryRoute (read from its handler: a route decorator). */
export function isRedeliveryRoute(context: ExecutionContext): boolean {
  return Reflect.getMetadata(REDELIVERY, context.getHandler()) === true;
}
