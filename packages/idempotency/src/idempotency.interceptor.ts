import { CallHandler, ExecutionContext, Inject, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { ClsService } from 'nestjs-cls';
import { Observable, catchError, from, lastValueFrom, of, throwError } from 'rxjs';
import { IdempotencyProblem, PROBLEM_JSON, idempotencyErrors } from './idempotency.errors';
import { HttpResponse } from './http-response';
import { IdempotencyContext } from './idempotency.context';
import { IdempotencyMetrics } from './idempotency.metrics';
import { IDEMPOTENCY_CLS, IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from './idempotency.options';
import { IdempotencyRequest } from './module-options';
import { ClaimRequest, ClaimResult, IdempotencyStore, StoredResponse } from './idempotency.store';
import { IdempotentRoutes, RouteSettings } from './idempotent-routes';
import { parseIdempotencyKey } from './idempotency-key';
import { fingerprint } from './fingerprint';
import { LeaseKeeper } from './lease-keeper';
import { aboutOperation, openSpan } from './idempotency.telemetry';
import { announceSettled, claimOrWait } from './key-claims';
import { OperationAttempt, SettledAttempt } from './operation-attempt';
import { runInOneCommit } from './one-commit-run';
import { PHASED_OPERATION, PhasedOperation } from './phased-operation';
import { ReplayCache } from './replay-cache';
import { checkScope } from './scope';
import { GraphqlIdempotency } from './contexts/graphql-context';
import { KeyedOperation } from './contexts/keyed-operation';
import { MessageIdempotency } from './contexts/message-context';

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
/** Retry-After of a 409 for a request still in progress. */
const IN_PROGRESS_RETRY_AFTER_S = 1;

type Claimed = Extract<ClaimResult, { kind: 'claimed' }>;

/**
 * The request path of an @Idempotent() route (see docs/idempotency.md):
 *
 *   parse key -> fingerprint -> in the replay cache? replay it (no database)
 *   -> claim-or-get (one autocommit statement)
 *     completed      -> replay stored status, headers, body + Idempotent-Replayed
 *     other request  -> 422          in progress -> 409 + Retry-After
 *     claimed        -> the attempt (OperationAttempt): a unit of the route's store
 *                       (a PostgreSQL transaction) { pipes + handler; fenced completion }
 *                       -> respond; a phased route runs its own units (PhasedOperation).
 *                       The lease is renewed while it runs (LeaseKeeper).
 *                       A one-commit route claims inside its own transaction instead
 *                       (runInOneCommit) and comes back here finished or answered.
 *   error in the unit: business outcome -> stored in it, committed, answered like a result
 *                      anything else    -> rolled back, key released if still ours, rethrown
 *
 * The response is serialised here, once, and those exact bytes are both stored
 * and sent, so a replay is byte-identical to the first response. The module's
 * own problems (400, 409, 422) are answered here too, complete (status,
 * problem+json, Link, Retry-After), so they do not depend on the app's
 * exception filter.
 *
 * A GraphQL resolver (`graphql`) and a microservice handler (`rpc`) take the
 * same claim, fencing, leases and stores through KeyedOperation; what differs
 * (where the key, scope and fingerprint come from, how a value is stored and
 * replayed, how a problem is answered) is in contexts/graphql-context.ts and
 * contexts/message-context.ts.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');
  private readonly graphql: GraphqlIdempotency;
  private readonly messages: MessageIdempotency;

  constructor(
    private readonly routes: IdempotentRoutes,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly metrics: IdempotencyMetrics,
    private readonly context: IdempotencyContext,
    private readonly replays: ReplayCache,
    @Inject(IDEMPOTENCY_CLS) private readonly cls: ClsService,
  ) {
    const operations = new KeyedOperation(metrics, replays, context, options.policyUrl);
    this.graphql = new GraphqlIdempotency(routes, options, operations);
    this.messages = new MessageIdempotency(routes, options, operations);
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
      const answer = await this.handle(context, next, res);
      return answer.pipe(catchError((error: unknown) => this.answerProblem(res, error)));
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
    const { policyUrl } = this.options;

    const header = req.headers['idempotency-key'];
    if (header === undefined) {
      if (!route.required) return next.handle();
      throw idempotencyErrors.missing(policyUrl);
    }
    const parsed = parseIdempotencyKey(Array.isArray(header) ? header.join(', ') : header);
    if (!parsed.ok) throw idempotencyErrors.invalid(policyUrl, parsed.reason);

    const scope = checkScope(this.options.scope(req));
    const body = route.fingerprint ? route.fingerprint(req) : (req.body as unknown);
    const request: ClaimRequest = {
      scope,
      key: parsed.key,
      fingerprint: fingerprint(req.method, req.originalUrl ?? req.url, body),
      leaseMs: route.leaseMs,
      retentionMs: route.retentionMs,
    };
    return aboutOperation(scope, parsed.key, route.operation, () => {
      const cached = this.replays.get(scope, parsed.key, request.fingerprint);
      if (cached) {
        this.metrics.replayCacheHits.inc();
        return this.replay(res, cached);
      }
      const span = openSpan('idempotency.request');
      return span.run(() =>
        this.claimAndRun(context, next, res, route, request).then(
          (answer) => {
            if (!answer.running) span.end();
            else void answer.running.then(() => span.end(), (error: unknown) => span.end(error));
            return answer.response;
          },
          (error: unknown) => {
            span.end(error instanceof IdempotencyProblem ? undefined : error);
            throw error;
          },
        ),
      );
    });
  }

  /** The claim, and what it leads to; `running`: the work of a claimed key, until it settles. */
  private async claimAndRun(
    context: ExecutionContext,
    next: CallHandler,
    res: HttpResponse,
    route: RouteSettings,
    request: ClaimRequest,
  ): Promise<{ response: Observable<unknown>; running?: Promise<string> }> {
    const { policyUrl } = this.options;
    // Before the claim is sent: the retention it reports is counted from here.
    const sentAt = performance.now();
    const claim = route.oneCommit
      ? await runInOneCommit({ ...route, oneCommit: route.oneCommit }, request, this.metrics, {
          entered: () => this.context.enter(request.key, route.operation),
          handle: () => lastValueFrom(next.handle(), { defaultValue: undefined }),
          respond: (value) => this.serialize(res, value),
        })
      : await claimOrWait(route.store, request, route.waitMs, this.metrics);

    switch (claim.kind) {
      case 'finished':
        // A one-commit route's request: claimed, run and committed.
        this.replays.rememberCommitted(route.store, request, claim.response, claim.retainedForMs, sentAt);
        return { response: of(this.send(res, claim.response, false)) };
      case 'lease_lost':
        throw idempotencyErrors.leaseLost(policyUrl);
      case 'completed':
        this.replays.rememberCommitted(route.store, request, claim.response, claim.retainedForMs, sentAt);
        return { response: this.replay(res, claim.response) };
      case 'mismatch':
        this.metrics.record('mismatch');
        throw idempotencyErrors.reused(policyUrl);
      case 'in_progress':
        this.metrics.record('in_progress');
        // The lease (claim.retryAfterMs left of it) only bounds a crashed owner; a
        // live one usually answers within a second, so clients are asked back soon.
        throw idempotencyErrors.inProgress(policyUrl, IN_PROGRESS_RETRY_AFTER_S);
      case 'claimed': {
        this.metrics.record(claim.takenOver ? 'taken_over' : 'claimed');
        this.context.enter(request.key, route.operation);
        let run = this.run(context, next, res, route, request, claim, sentAt);
        // Duplicates may be waiting for this key: wake them once it has settled.
        if (route.waitMs > 0) run = run.finally(() => announceSettled(route.store, claim.owner));
        return { response: from(run), running: run };
      }
    }
  }

  /**
   * The attempt of a claimed key: a plain route is one unit, the handler and
   * its completion; a phased route's handler runs its own phases (no unit here)
   * and ends with finish() (sent as stored) or release(). Settled once.
   */
  private async run(
    context: ExecutionContext,
    next: CallHandler,
    res: HttpResponse,
    route: RouteSettings,
    request: ClaimRequest,
    claim: Claimed,
    sentAt: number,
  ): Promise<string> {
    const lease = new LeaseKeeper(claim.owner, route.store, route.leaseMs, sentAt);
    const attempt = new OperationAttempt(lease, route.store, claim.recovery);
    const handle = () => lastValueFrom(next.handle(), { defaultValue: undefined });
    let work: () => Promise<unknown> = () => attempt.completeWith(handle, (value) => this.serialize(res, value));
    if (route.phased) {
      // Nest has set the route's status already: a success answers with it.
      const operation = new PhasedOperation(attempt, route.phased, res.status);
      context.switchToHttp().getRequest<Record<symbol, unknown>>()[PHASED_OPERATION] = operation;
      work = handle;
    }
    const settled = await attempt.settle(work, () => `the phased handler of ${route.operation} returned without finish() or release()`);
    this.metrics.requestEnded(settled.end, settled.error);
    return this.answer(res, route.store, request, settled, claim.retainedForMs, sentAt);
  }

  /** What a settled attempt answers: its response, 409 when its lease was lost, else its error. */
  private answer(res: HttpResponse, store: IdempotencyStore, request: ClaimRequest, settled: SettledAttempt<unknown>, retainedForMs: number | undefined, sentAt: number): string {
    const { end } = settled;
    switch (end.kind) {
      case 'finished':
        if (end.notStored) {
          // The work happened: answer it rather than invite a retry that repeats it.
          // The key stays in progress; a retry after the lease runs the route again.
          this.logger.error(end.notStored.message);
        } else {
          this.replays.rememberCommitted(store, request, end.response, retainedForMs, sentAt);
        }
        return this.send(res, end.response, false);
      case 'lease_lost':
        // The key belongs to the attempt that took it over: nothing of ours to release.
        throw idempotencyErrors.leaseLost(this.options.policyUrl);
      case 'released':
      case 'held':
      case 'gave_up':
        throw settled.error;
    }
  }

  /** The handler's result as the exact bytes that will be sent and stored. */
  private serialize(res: HttpResponse, value: unknown): StoredResponse {
    const common = { status: res.status, location: res.getHeader('location') };
    if (typeof value === 'string') {
      return { ...common, body: value, contentType: res.getHeader('content-type') ?? 'text/plain; charset=utf-8' };
    }
    return { ...common, body: value === undefined ? '' : JSON.stringify(value), contentType: JSON_CONTENT_TYPE };
  }

  /** A retry: the stored response, as stored, with Idempotent-Replayed. */
  private replay(res: HttpResponse, response: StoredResponse): Observable<string> {
    this.metrics.record('replayed');
    return of(this.send(res, response, true));
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
