import { CallHandler, ExecutionContext, Inject, Injectable, NestInterceptor } from '@nestjs/common';
import { ClsService } from 'nestjs-cls';
import { Observable, catchError, lastValueFrom, of, throwError } from 'rxjs';
import { IdempotencyProblem, PROBLEM_JSON } from '../contract/idempotency.errors';
import { HttpResponse } from './http-response';
import { IdempotencyContext } from '../core/idempotency.context';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { IDEMPOTENCY_CLS, IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { IdempotencyRequest } from '../contract/idempotency-request';
import { StoredResponse } from '../contract/idempotency.store';
import { IdempotentRoutes } from '../routes/idempotent-routes';
import { fingerprint } from '../core/fingerprint';
import { PHASED_OPERATION, PhasedOperation } from '../core/phased-operation';
import { ReplayCache } from '../core/replay-cache';
import { requestScope } from '../core/scope';
import { RouteWarnings } from '../core/route-warnings';
import { GraphqlIdempotency } from '../contexts/graphql-context';
import { KeyedOperation } from '../core/keyed-operation';
import { MessageIdempotency } from '../contexts/message-context';

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** The log line of a request whose `scope` gave no principal: the reason and both fixes. */
export function scopeFix(fault: string): string {
  return (
    `IdempotencyModule's \`scope\` ${fault}, so the request was answered 500 idempotency_scope_missing. ` +
    "Put the route behind the app's authentication, so that `scope` finds the principal (e.g. `scope: (req) => req.user?.id` after a guard that sets req.user); " +
    "in an app without authentication, `scope: () => 'public'` keeps every client's keys in one space (then keys must be unguessable, e.g. UUIDs)"
  );
}

/**
 * @Idempotent() on an HTTP route, a GraphQL resolver or a message handler:
 * each reads its call's key, scope and fingerprint and hands the rest to
 * KeyedOperation (the claim, the attempt, the answer; see docs/idempotency.md).
 *
 * On HTTP, the response is serialised here, once, and those exact bytes are
 * both stored and sent, so a replay is byte-identical to the first response
 * (a route with `replay` stores what its provider keeps of them, and each
 * replay's body is what the provider rebuilds: IdempotentReplay).
 * The module's own problems (400, 409, 422) are answered here too, complete
 * (status, problem+json, Link, Retry-After), so they do not depend on the
 * app's exception filter. GraphQL and messages: contexts/graphql-context.ts
 * and contexts/message-context.ts.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly operations: KeyedOperation;
  private readonly graphql: GraphqlIdempotency;
  private readonly messages: MessageIdempotency;
  private readonly warnings = new RouteWarnings();

  constructor(
    private readonly routes: IdempotentRoutes,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly metrics: IdempotencyMetrics,
    private readonly context: IdempotencyContext,
    private readonly replays: ReplayCache,
    @Inject(IDEMPOTENCY_CLS) private readonly cls: ClsService,
  ) {
    this.operations = new KeyedOperation(metrics, replays, context, options.policyUrl);
    this.graphql = new GraphqlIdempotency(routes, options, this.operations, this.warnings);
    this.messages = new MessageIdempotency(routes, options, this.operations, this.warnings);
  }

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    // The request's context (its transaction, its key), unless the app opened one already
    // (nestjs-cls's middleware, guard or interceptor, or a hook of its own).
    if (!this.cls.isActive()) return this.cls.run(() => this.intercept(context, next));
    // 'graphql' is @nestjs/graphql's context type, outside Nest's own ContextType.
    const type = context.getType<string>();
    if (type === 'graphql') return this.graphql.intercept(context, next);
    if (type === 'rpc') return this.messages.intercept(context, next);
    const res = HttpResponse.of(context.switchToHttp().getResponse());
    try {
      return await this.handle(context, next, res);
    } catch (error) {
      return this.answerProblem(res, error);
    }
  }

  /** An IdempotencyProblem becomes the response; anything else goes on to the app's filters. */
  private answerProblem(res: HttpResponse, error: unknown): Observable<string> {
    if (!(error instanceof IdempotencyProblem)) return throwError(() => error);
    res.setStatus(error.getStatus()).setHeader('Content-Type', PROBLEM_JSON);
    for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
    return of(JSON.stringify(error.getResponse()));
  }

  private async handle(context: ExecutionContext, next: CallHandler, res: HttpResponse): Promise<Observable<unknown>> {
    const req = context.switchToHttp().getRequest<IdempotencyRequest>();
    const route = this.routes.of(context);
    const header = req.headers['idempotency-key'];
    const key = this.operations.keyOf(route, Array.isArray(header) ? header.join(', ') : header);
    if (key === undefined) return next.handle().pipe(catchError((error: unknown) => this.answerProblem(res, error)));

    const scope = requestScope(this.options.scope(req), this.options.policyUrl, (fault) =>
      this.warnings.once('scope', `${req.method} ${context.getClass().name}.${context.getHandler().name}`, scopeFix(fault)),
    );
    const body = route.fingerprint ? route.fingerprint(req) : (req.body as unknown);
    const { replay } = route;
    // With `replay`, the first answer is the handler's value, and what is stored is what `replay.store` keeps of it.
    let first: StoredResponse | undefined;
    const answer = await this.operations.run<Promise<string>>(
      route,
      { scope, key, fingerprint: fingerprint(req.method, req.originalUrl ?? req.url, body) },
      () => lastValueFrom(next.handle(), { defaultValue: undefined }),
      {
        stored: (value) => {
          const response = this.serialize(res, value);
          if (!replay) return response;
          first = response;
          return { ...response, body: JSON.stringify(replay.store(value)) ?? '' };
        },
        answer: async (response, replayed) => {
          if (!replayed) return this.send(res, first ?? response, false);
          // A business outcome (400 and above) is replayed as stored; what `store` kept is rebuilt.
          if (!replay || response.status >= 400) return this.send(res, response, true);
          const rebuilt = await replay.replay(response.body === '' ? undefined : (JSON.parse(response.body) as unknown), req);
          return this.send(res, { ...response, body: this.bodyOf(rebuilt) }, true);
        },
        phased: (attempt, name) => {
          // Nest has set the route's status already: a success answers with it.
          context.switchToHttp().getRequest<Record<symbol, unknown>>()[PHASED_OPERATION] = new PhasedOperation(attempt, name, res.status);
        },
      },
    );
    return of(answer);
  }

  /** The handler's result as the exact bytes that will be sent and stored. */
  private serialize(res: HttpResponse, value: unknown): StoredResponse {
    const common = { status: res.status, location: res.getHeader('location') };
    if (typeof value === 'string') {
      return { ...common, body: value, contentType: res.getHeader('content-type') ?? 'text/plain; charset=utf-8' };
    }
    return { ...common, body: this.bodyOf(value), contentType: JSON_CONTENT_TYPE };
  }

  /** A handler's value as the bytes of a body: a string as it is, anything else as JSON. */
  private bodyOf(value: unknown): string {
    if (typeof value === 'string') return value;
    return value === undefined ? '' : JSON.stringify(value);
  }

  /**
   * Nest has set the route's status before interceptors run and does not set it
   * again, so the stored status, type and bytes go out exactly as stored.
   */
  private send(res: HttpResponse, response: StoredResponse, replayed: boolean): string {
    res.setStatus(response.status);
    res.setHeader('Content-Type', response.contentType);
    if (response.location) res.setHeader('Location', response.location);
    if (replayed) res.setHeader('Idempotent-Replayed', 'true');
    return response.body;
  }
}
