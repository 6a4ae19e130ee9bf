import { CallHandler, ExecutionContext, Inject, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Observable, catchError, from, lastValueFrom, of, throwError } from 'rxjs';
import { IdempotencyProblem, LeaseLostError, PROBLEM_JSON, idempotencyErrors } from './idempotency.errors';
import { HttpResponse } from './http-response';
import { IdempotencyContext } from './idempotency.context';
import { IdempotencyMetrics, IdempotencyOutcome } from './idempotency.metrics';
import {
  IDEMPOTENCY_OPTIONS,
  IDEMPOTENCY_TX_HOST,
  IdempotencyRequest,
  IdempotentMetadata,
  IdempotentOptions,
  ResolvedIdempotencyOptions,
  resolveTiming,
} from './idempotency.options';
import { ClaimRequest, ClaimResult, IDEMPOTENCY_REDIS_STORE, IDEMPOTENCY_STORE, IdempotencyKeyStore, IdempotencyStore, StoredResponse } from './idempotency.store';
import { routeProblem } from './idempotency-routes.check';
import type { RedisIdempotencyStore } from './redis-idempotency.store';
import { parseDuration } from './duration';
import { parseIdempotencyKey } from './idempotency-key';
import { fingerprint } from './fingerprint';
import { IDEMPOTENT_OUTCOME, isIdempotentOutcome } from './idempotent-outcome';
import { LeaseKeeper } from './lease-keeper';
import { aboutOperation, emit, inSpan, openSpan } from './idempotency.telemetry';
import { PHASED_OPERATION, PhasedOperation } from './phased-operation';
import { ReplayCache } from './replay-cache';

interface RouteSettings {
  required: boolean;
  /** The operation name of a phased route (see PhasedOperation). */
  phased?: string;
  /** What spans and events call it: the phased name, else `Controller.handler`. */
  operation: string;
  /** How long a duplicate waits for the owner to finish (0: answer 409 at once). */
  waitMs: number;
  leaseMs: number;
  retentionMs: number;
  fingerprint?: IdempotentOptions['fingerprint'];
  /** Where its keys are kept; `transactional`: the PostgreSQL store, whose completion commits with the handler's writes. */
  store: IdempotencyKeyStore;
  transactional: boolean;
}

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
/** Retry-After of a 409 for a request still in progress. */
const IN_PROGRESS_RETRY_AFTER_S = 1;

/**
 * The request path of an @Idempotent() route (see docs/idempotency.md):
 *
 *   parse key -> fingerprint -> in the replay cache? replay it (no database)
 *   -> claim-or-get (one autocommit statement)
 *     completed      -> replay stored status, headers, body + Idempotent-Replayed
 *     other request  -> 422          in progress -> 409 + Retry-After
 *     claimed        -> transaction T { pipes + handler; fenced completion } -> respond
 *                       (the lease renewed while it runs: LeaseKeeper)
 *   error in T: business outcome -> stored in T, committed, answered like a result
 *               anything else    -> rolled back, key released if still ours, rethrown
 *
 * The response is serialised here, once, and those exact bytes are both stored
 * and sent, so a replay is byte-identical to the first response. The module's
 * own problems (400, 409, 422) are answered here too, complete (status,
 * problem+json, Link, Retry-After), so they do not depend on the app's
 * exception filter.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');
  private readonly routes = new WeakMap<object, RouteSettings>();

  constructor(
    private readonly reflector: Reflector,
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_REDIS_STORE) private readonly redisStore: RedisIdempotencyStore | null,
    @Inject(IDEMPOTENCY_TX_HOST) private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly metrics: IdempotencyMetrics,
    private readonly context: IdempotencyContext,
    private readonly replays: ReplayCache,
  ) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
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
    const route = this.settings(context);
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

    const request = {
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
    const req = context.switchToHttp().getRequest<IdempotencyRequest>();
    const { policyUrl } = this.options;
    // Before the claim is sent: the retention it reports is counted from here.
    const sentAt = performance.now();
    let claim = await inSpan('idempotency.claim', () => this.claim(route.store, request));
    if (claim.kind === 'in_progress' && route.waitMs > 0) claim = await this.waitForOwner(route.store, request, route.waitMs);

    switch (claim.kind) {
      case 'completed':
        this.remember(request, claim.response, claim.retainedForMs, sentAt);
        return { response: this.replay(res, claim.response) };
      case 'mismatch':
        this.record('mismatch');
        throw idempotencyErrors.reused(policyUrl);
      case 'in_progress':
        this.record('in_progress');
        // The lease (claim.retryAfterMs left of it) only bounds a crashed owner; a
        // live one usually answers within a second, so clients are asked back soon.
        throw idempotencyErrors.inProgress(policyUrl, IN_PROGRESS_RETRY_AFTER_S);
      case 'claimed': {
        this.record(claim.takenOver ? 'taken_over' : 'claimed');
        this.context.enter(request.key);
        const owner = claim.owner;
        const lease = new LeaseKeeper(owner, route.store, route.leaseMs, sentAt);
        const { retainedForMs } = claim;
        const committed = (response: StoredResponse) => {
          this.remember(request, response, retainedForMs, sentAt);
          return this.send(res, response, false);
        };
        let run: Promise<string>;
        if (!route.transactional) {
          run = this.executeWithoutTransaction(res, next, route.store, lease, committed);
        } else if (!route.phased) {
          run = this.execute(res, next, lease, committed);
        } else {
          // Nest has set the route's status already: a success answers with it.
          const operation = new PhasedOperation(lease, route.phased, res.status, claim.recovery, this.store, this.txHost);
          (req as unknown as Record<symbol, unknown>)[PHASED_OPERATION] = operation;
          run = this.executePhased(next, operation, lease, committed);
        }
        run = run.finally(() => lease.stop());
        // Duplicates may be waiting for this key: wake them once it has settled.
        if (route.waitMs > 0) run = run.finally(() => this.announceSettled(route.store, owner));
        return { response: from(run), running: run };
      }
    }
  }

  /** An outcome: counted on /metrics, and told to spans and the diagnostics channel. */
  private record(outcome: IdempotencyOutcome): void {
    this.metrics.count(outcome);
    emit(outcome);
  }

  /** `committed`: answers with the response once it is stored (the transaction committed). */
  private async execute(res: HttpResponse, next: CallHandler, lease: LeaseKeeper, committed: (response: StoredResponse) => string): Promise<string> {
    let response: StoredResponse;
    try {
      response = await this.txHost.withTransaction(async () => {
        let result: StoredResponse;
        try {
          result = this.serialize(res, await lastValueFrom(next.handle(), { defaultValue: undefined }));
        } catch (error) {
          if (!isIdempotentOutcome(error)) throw error;
          const { status, body, contentType } = error[IDEMPOTENT_OUTCOME]();
          result = { status, body, contentType };
        }
        await lease.end((owner) => this.store.complete(owner, result));
        return result;
      });
    } catch (error) {
      if (error instanceof LeaseLostError) {
        // The key belongs to the attempt that took it over: nothing of ours to release.
        this.record('lease_lost');
        throw idempotencyErrors.leaseLost(this.options.policyUrl);
      }
      await this.release(this.store, lease);
      throw error;
    }
    return committed(response);
  }

  /**
   * A route on the Redis store: the handler runs without a database transaction
   * (its side effect is not in this database), then the response is stored,
   * fenced. An error other than a business outcome releases the key (fenced), so
   * a retry runs again. A completion refused (the lease was taken over) answers
   * 409 lease lost and leaves the newer owner's claim and response standing;
   * the side effect of this attempt has happened all the same, which is what
   * Redis cannot prevent (packages/idempotency/README.md, "A Redis store").
   */
  private async executeWithoutTransaction(
    res: HttpResponse,
    next: CallHandler,
    store: IdempotencyKeyStore,
    lease: LeaseKeeper,
    committed: (response: StoredResponse) => string,
  ): Promise<string> {
    let response: StoredResponse;
    try {
      response = this.serialize(res, await lastValueFrom(next.handle(), { defaultValue: undefined }));
    } catch (error) {
      if (!isIdempotentOutcome(error)) {
        await this.release(store, lease);
        throw error;
      }
      const { status, body, contentType } = error[IDEMPOTENT_OUTCOME]();
      response = { status, body, contentType };
    }
    try {
      const stored = response;
      await lease.end((owner) => store.complete(owner, stored));
    } catch (error) {
      if (error instanceof LeaseLostError) {
        this.record('lease_lost');
        throw idempotencyErrors.leaseLost(this.options.policyUrl);
      }
      // The side effect happened: answer it rather than invite a retry that repeats it.
      // The key stays in progress; a retry after the lease runs the route again.
      this.logger.error(`could not store a response in Redis after the handler ran: ${(error as Error).message}`);
      return this.send(res, response, false);
    }
    return committed(response);
  }

  /**
   * A phased route: the handler runs its own phases (no transaction here) and
   * ends with finish() (sent as stored) or release(); see PhasedOperation.
   */
  private async executePhased(
    next: CallHandler,
    operation: PhasedOperation,
    lease: LeaseKeeper,
    committed: (response: StoredResponse) => string,
  ): Promise<string> {
    try {
      await lastValueFrom(next.handle(), { defaultValue: undefined });
    } catch (error) {
      const ending = operation.outcome;
      if (ending?.kind === 'finished') return committed(ending.response);
      await this.settleFailure(operation, lease, error);
      throw error;
    }
    const ending = operation.outcome;
    if (ending?.kind === 'finished') return committed(ending.response);
    const error = new Error(`the phased handler of ${operation.name} returned without finish() or release()`);
    await this.settleFailure(operation, lease, error);
    throw error;
  }

  /** After a phased handler failed: what becomes of the key (see PhasedOperation). */
  private async settleFailure(operation: PhasedOperation, lease: LeaseKeeper, error: unknown): Promise<void> {
    if (error instanceof LeaseLostError) {
      this.record('lease_lost');
      throw idempotencyErrors.leaseLost(this.options.policyUrl);
    }
    // Released: the key is gone. Held: kept, with the lease the operation asked for.
    if (operation.outcome?.kind === 'released' || operation.outcome?.kind === 'held') return;
    if (operation.recoveryPoint === null) {
      await this.release(this.store, lease);
      return;
    }
    // Something committed and the rest is unknown: keep the key and its recovery
    // point, and let the next attempt take over now rather than after the lease.
    try {
      await lease.end((owner) => this.store.yieldLease(owner));
      this.record('yielded');
    } catch (yieldError) {
      this.logger.warn(`could not give up the lease after a failure: ${(yieldError as Error).message}`);
    }
  }

  private async claim(store: IdempotencyKeyStore, request: ClaimRequest): Promise<ClaimResult> {
    const started = process.hrtime.bigint();
    const claim = await store.claim(request);
    this.metrics.claimDuration.observe(Number(process.hrtime.bigint() - started) / 1e9);
    return claim;
  }

  /**
   * `@Idempotent({ wait })`: the owner is still at work; wait for its key to
   * settle (LISTEN/NOTIFY, see the store), then ask again, until it is no longer
   * in progress or the time is up (then the last answer, 409, stands).
   */
  private async waitForOwner(store: IdempotencyKeyStore, request: ClaimRequest, waitMs: number): Promise<ClaimResult> {
    const { awaitSettled } = store;
    if (!awaitSettled) return { kind: 'in_progress', retryAfterMs: waitMs };
    const deadline = performance.now() + waitMs;
    let claim: ClaimResult = { kind: 'in_progress', retryAfterMs: waitMs };
    while (claim.kind === 'in_progress' && performance.now() < deadline) {
      // Registered before asking again: a settlement in between is not missed.
      const waiting = awaitSettled.call(store, request.scope, request.key, deadline - performance.now());
      claim = await this.claim(store, request);
      if (claim.kind !== 'in_progress') {
        waiting.cancel();
        break;
      }
      await waiting.settled;
      claim = await this.claim(store, request);
    }
    return claim;
  }

  private announceSettled(store: IdempotencyKeyStore, owner: { scope: string; key: string }): void {
    store.announceSettled?.(owner.scope, owner.key).catch((error: unknown) => {
      this.logger.warn(`could not wake the requests waiting for a key: ${(error as Error).message}`);
    });
  }

  private async release(store: IdempotencyKeyStore, lease: LeaseKeeper): Promise<void> {
    try {
      await lease.end((owner) => store.release(owner));
      this.record('released');
    } catch (error) {
      // The lease still frees the key; a retry after it takes the key over.
      this.logger.warn(`could not release key after a failure: ${(error as Error).message}`);
    }
  }

  /**
   * Keeps a stored response for replays from memory, once it is committed: not
   * while an outer transaction of the app is still open around this request
   * (it could yet roll the response back), nor when the store cannot say how
   * long the key is kept.
   */
  private remember(request: ClaimRequest, response: StoredResponse, retainedForMs: number | undefined, sentAt: number): void {
    if (retainedForMs === undefined || this.txHost.isTransactionActive()) return;
    this.replays.remember(request.scope, request.key, request.fingerprint, response, retainedForMs, sentAt);
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
    this.record('replayed');
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

  private settings(context: ExecutionContext): RouteSettings {
    const handler = context.getHandler();
    let settings = this.routes.get(handler);
    if (!settings) {
      const o = this.reflector.getAllAndOverride(IdempotentMetadata, [handler, context.getClass()]) ?? {};
      const where = `@Idempotent() on ${context.getClass().name}.${handler.name}`;
      // IdempotencyRoutesCheck refused such a route at startup; this covers one it could not see.
      const problem = routeProblem(o, this.options);
      if (problem) throw new Error(`${where}: ${problem}`);
      const redis = (o.store ?? this.options.store) === 'redis';
      settings = {
        required: o.required ?? true,
        phased: o.phased,
        operation: o.phased ?? `${context.getClass().name}.${handler.name}`,
        waitMs: o.wait === undefined ? 0 : parseDuration(o.wait),
        ...resolveTiming(o, this.options, where),
        fingerprint: o.fingerprint,
        store: redis ? this.redisStore! : this.store,
        transactional: !redis,
      };
      this.routes.set(handler, settings);
    }
    return settings;
  }
}

/** The longest scope (principal id) a key can be stored under. */
export const MAX_SCOPE_LENGTH = 255;

/**
 * The scope a key is stored under: any non-empty string the app's `scope`
 * returns (a UUID, `42`, `acct_9f3`). Anything else is a wiring mistake of the
 * app, answered 500 with the reason in the log, never a key shared by everyone.
 */
export function checkScope(scope: unknown): string {
  if (typeof scope !== 'string' || scope.length === 0) {
    const got = typeof scope === 'string' ? 'an empty string' : String(scope);
    throw new Error(
      `@Idempotent(): the scope function returned ${got}; it must return the id of the request's principal as a non-empty string (is the route behind the app's authentication?)`,
    );
  }
  if (scope.includes('\0')) {
    throw new Error('@Idempotent(): the scope function returned a string with a NUL character; a scope is text without NUL');
  }
  if (scope.length > MAX_SCOPE_LENGTH) {
    throw new Error(`@Idempotent(): the scope function returned ${scope.length} characters; a scope is at most ${MAX_SCOPE_LENGTH}`);
  }
  return scope;
}
