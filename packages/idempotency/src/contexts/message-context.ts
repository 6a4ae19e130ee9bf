import { CallHandler, ExecutionContext } from '@nestjs/common';
import { Observable, lastValueFrom, of } from 'rxjs';
import { asMessageError } from './context-errors';
import { fingerprint } from '../core/fingerprint';
import { ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { IdempotencyKeySource } from '../config/module-options';
import { RouteSettings } from '../core/route-settings';
import { IdempotentRoutes, messagePatterns } from '../routes/idempotent-routes';
import { KeyedOperation } from '../core/keyed-operation';
import { VALUE_ANSWERS } from './value-answers';
import { requestScope } from '../core/scope';
import { RouteWarnings } from '../core/route-warnings';

/** The default key of a message: its payload's `idempotencyKey` field. */
const DEFAULT_KEY: IdempotencyKeySource = { field: 'idempotencyKey' };

/**
 * What the transports' contexts offer of a message's headers: NATS
 * (`getHeaders()`), Kafka (`getMessage().headers`), RabbitMQ
 * (`getMessage().properties.headers`); TCP has none.
 */
export interface TransportContext {
  getHeaders?(): unknown;
  getMessage?(): unknown;
}

/**
 * @Idempotent() on a microservice handler (@MessagePattern, @EventPattern),
 * read through Nest's `switchToRpc()`, so this module needs nothing of
 * @nestjs/microservices:
 *
 * - the key: the payload's `idempotencyKey` field, or what `key` names (a
 *   field, a transport header, a function of the payload and the context);
 * - the scope: `messageScope`, else one per handler: `message:` and its
 *   pattern (a message has no authenticated principal);
 * - the fingerprint: the scope and the payload (canonical JSON);
 * - the answer: the handler's value stored as JSON and replayed as the reply;
 *   an event handler's duplicate is acknowledged and skipped (its effect ran
 *   once, there is no reply);
 * - a duplicate of a message still in progress is refused with the retryable
 *   `IDEMPOTENCY_KEY_IN_USE` (`retryAfter` seconds), never run alongside it;
 * - problems: `{ status: 'error', code, message, retryAfter? }` errors
 *   (context-errors.ts).
 */
export class MessageIdempotency {
  constructor(
    private readonly routes: IdempotentRoutes,
    private readonly options: ResolvedIdempotencyOptions,
    private readonly operations: KeyedOperation,
    private readonly warnings: RouteWarnings,
  ) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    try {
      return await this.handle(context, next);
    } catch (error) {
      throw asMessageError(error);
    }
  }

  private async handle(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const rpc = context.switchToRpc();
    const data: unknown = rpc.getData();
    const transport = rpc.getContext<TransportContext | undefined>();
    const route = this.routes.of(context);

    const key = this.operations.keyOf(route, readMessageKey(route.key ?? DEFAULT_KEY, data, transport));
    if (key === undefined) return next.handle();

    const scope = requestScope(scopeOf(route, context.getHandler(), data, transport), this.options.policyUrl, (fault) =>
      this.warnings.once('scope', `${context.getClass().name}.${context.getHandler().name}`, `@Idempotent({ messageScope }) ${fault}; give a constant, or a function that always finds one`),
    );
    const answer = await this.operations.run(
      route,
      { scope, key, fingerprint: fingerprint('MESSAGE', scope, data) },
      () => lastValueFrom(next.handle(), { defaultValue: undefined }),
      VALUE_ANSWERS,
    );
    return of(answer.value);
  }
}

function scopeOf(route: RouteSettings, handler: object, data: unknown, transport: TransportContext | undefined): string | undefined {
  const { messageScope } = route;
  if (typeof messageScope === 'string') return messageScope;
  if (messageScope) return messageScope(data, transport);
  const patterns = messagePatterns(handler);
  const pattern = patterns?.length === 1 ? patterns[0] : patterns;
  return `message:${typeof pattern === 'string' ? pattern : JSON.stringify(pattern ?? route.operation)}`;
}

/** The key of a message, read where `source` says (undefined: the message has none). */
export function readMessageKey(source: IdempotencyKeySource, data: unknown, transport: TransportContext | undefined): string | undefined {
  if (typeof source === 'function') return source(data, transport);
  if ('field' in source) {
    const value = typeof data === 'object' && data !== null ? (data as Record<string, unknown>)[source.field] : undefined;
    return typeof value === 'string' || typeof value === 'number' ? String(value) : undefined;
  }
  if ('header' in source) return headerOf(transport, source.header);
  throw new Error('@Idempotent() on a message handler: key { arg } names a GraphQL argument; use { field } or { header }');
}

/** A header of the transport's message, when the transport has headers. */
function headerOf(transport: TransportContext | undefined, name: string): string | undefined {
  const message = transport?.getMessage?.() as { headers?: unknown; properties?: { headers?: unknown } } | undefined;
  const headers = transport?.getHeaders?.() ?? message?.headers ?? message?.properties?.headers;
  if (typeof headers !== 'object' || headers === null) return undefined;
  // NATS headers are a MsgHdrs with get(); the others plain objects (Kafka's values may be Buffers).
  const found: unknown =
    typeof (headers as { get?: unknown }).get === 'function'
      ? (headers as { get(name: string): unknown }).get(name)
      : ((headers as Record<string, unknown>)[name] ?? (headers as Record<string, unknown>)[name.toLowerCase()]);
  if (Buffer.isBuffer(found)) return found.toString('utf8');
  return typeof found === 'string' && found !== '' ? found : undefined;
}
