import { ExecutionContext, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';

export const IS_PUBLIC = 'auth:public';

/** Marks a route (or controller) that needs no API key: health, metrics. */
export const Public = () => SetMetadata(IS_PUBLIC, true);

/** Per controller class, per handler: whether the route is @Public() (metadata never changes once the app runs). */
const publicRoutes = new WeakMap<object, WeakMap<object, boolean>>();

/** Whether the route of a request is @Public() (on its handler or its controller), looked up once per route. */
export function isPublicRoute(reflector: Reflector, context: ExecutionContext): boolean {
  const handler = context.getHandler();
  const controller = context.getClass();
  let routes = publicRoutes.get(controller);
  if (routes === undefined) publicRoutes.set(controller, (routes = new WeakMap()));
  let known = routes.get(handler);
  if (known === undefined) {
    known = reflector.getAllAndOverride<boolean>(IS_PUBLIC, [handler, controller]) === true;
    routes.set(handler, known);
  }
  return known;
}
