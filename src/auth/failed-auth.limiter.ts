import { Inject, Injectable, Logger, OnApplicationShutdown, Optional } from '@nestjs/common';
import { AsyncResource } from 'node:async_hooks';
import type { onRequestHookHandler, FastifyReply } from 'fastify';
import { LRUCache } from 'lru-cache';
import { sendProblem } from '../common/http';
import { problems } from '../common/problem';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { isMetricsTokenValid } from '../metrics/metrics-access';
import { bearerToken } from './api-key';
import { AuthenticatedClient } from './authenticated-client';
import { ClientsService } from './clients.service';

/** The window of an address's budget, and the interval of the summary line. */
const WINDOW_MS = 60_000;
/**
 * At most this many addresses are tracked (about 100 bytes each); past it the
 * least recently seen is forgotten, so a flood from many addresses costs a
 * bounded amount of memory. A blocked address that keeps sending stays recent.
 */
export const MAX_TRACKED_ADDRESSES = 10_000;
/** Injection token of another cap than MAX_TRACKED_ADDRESSES (optional). */
export const FAILED_AUTH_MAX_ADDRESSES = Symbol('FAILED_AUTH_MAX_ADDRESSES');

interface MinuteCounts {
  /** Failed authentications. */
  failures: number;
  /** Addresses whose window started (their first failure of a window). */
  addresses: number;
  /** Addresses that reached their budget. */
  blocked: number;
  /** Requests refused with 429 in the onRequest hook. */
  refused: number;
  /** Failures already written in a line of this minute. */
  told: number;
}

const noCounts = (): MinuteCounts => ({ failures: 0, addresses: 0, blocked: 0, refused: 0, told: 0 });

/**
 * Failed authentications (a missing or unknown API key, a wrong metrics token)
 * per client address: RATE_LIMIT_UNAUTHENTICATED a minute, in this instance's
 * memory. The address is Fastify's `request.ip`: the peer's, or with
 * TRUST_PROXY the one a trusted proxy forwarded.
 *
 * A valid credential always works. The Fastify onRequest hook from `hook()`
 * runs before the body is read: a request from an address within its budget
 * passes after one cache lookup; from an address over it, a request without a
 * credential is refused 429 at once, and one with a credential passes only if
 * the credential is valid (ClientsService's cached lookup, or the metrics
 * token), else 429. A refusal reads no body and writes no log line.
 *
 * The log never gets a line per address: the first failure after a quiet
 * minute is warned at once (with its address), then each minute with failures
 * or refusals is summed up in one line (addresses blocked, failures,
 * refusals), until a minute passes without any.
 */
@Injectable()
export class FailedAuthLimiter implements OnApplicationShutdown {
  private readonly logger = new Logger('Auth');
  private readonly limit: number;
  /** Failures per address in its window; an entry lives WINDOW_MS from its address's first failure. */
  private readonly failures: LRUCache<string, number>;
  private minute = noCounts();
  /** Set while a minute is being counted: its end writes the summary line. */
  private summaryTimer?: NodeJS.Timeout;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clients: ClientsService,
    @Optional() @Inject(FAILED_AUTH_MAX_ADDRESSES) maxAddresses: number = MAX_TRACKED_ADDRESSES,
  ) {
    this.limit = config.rateLimit.unauthenticatedPerMinute;
    this.failures = new LRUCache({ max: maxAddresses, ttl: WINDOW_MS });
  }

  /** How many addresses are tracked now (never more than the cap, MAX_TRACKED_ADDRESSES by default). */
  get trackedAddresses(): number {
    return this.failures.size;
  }

  /** Seconds until the address may fail again, or undefined when it is within its budget. */
  blockedFor(address: string): number | undefined {
    const failures = this.failures.get(address);
    if (failures === undefined || failures < this.limit) return undefined;
    return this.failures.getRemainingTTL(address) / 1000;
  }

  /** Counts a failed authentication of the address. */
  recordFailure(address: string): void {
    const quiet = this.summaryTimer === undefined;
    const failures = (this.failures.get(address) ?? 0) + 1;
    if (failures === 1) {
      this.failures.set(address, failures);
      this.minute.addresses++;
    } else {
      // The window is the one of the address's first failure.
      this.failures.set(address, failures, { noUpdateTTL: true });
    }
    if (failures === this.limit) this.minute.blocked++;
    this.minute.failures++;
    this.countMinute();
    if (quiet) {
      this.minute.told = this.minute.failures;
      this.logger.warn({ address }, 'failed authentication (then one summary line a minute while failures go on)');
    }
  }

  /** The Fastify onRequest hook that refuses an address over its budget (see the class comment). */
  hook(): onRequestHookHandler {
    return (request, reply, done) => {
      const seconds = this.blockedFor(request.ip);
      if (seconds === undefined) return done();
      const authorization = request.headers.authorization;
      const key = bearerToken(authorization);
      if (key === undefined) return this.refuse(reply, seconds);
      this.isValidCredential(request, key, authorization).then(
        (valid) => (valid ? done() : this.refuse(reply, seconds)),
        (error: Error) => done(error),
      );
    };
  }

  /**
   * Writes the summary line of the minute now, if it had failures or refusals
   * not written yet; the limiter's timer calls it at the end of each minute.
   */
  writeSummary(): void {
    clearTimeout(this.summaryTimer);
    this.summaryTimer = undefined;
    const m = this.minute;
    this.minute = noCounts();
    if (m.failures === m.told && m.refused === 0) return;
    this.logger.warn(
      { failures: m.failures, addresses: m.addresses, blocked: m.blocked, refused: m.refused, tracked: this.failures.size },
      `failed authentications in the last minute: ${m.blocked} addresses blocked, ${m.failures} failures from ${m.addresses} addresses, ${m.refused} requests refused`,
    );
    // The next minute is counted too: a flood that goes on writes one line a minute.
    this.countMinute();
  }

  onApplicationShutdown(): void {
    clearTimeout(this.summaryTimer);
    this.summaryTimer = undefined;
  }

  /**
   * Whether the key is a client's active key or, where /metrics is served on
   * this port, the metrics token. A client found is kept on the request, so the
   * later authentication of the request does not look it up again.
   */
  private async isValidCredential(request: { client?: AuthenticatedClient }, key: string, authorization: string | undefined): Promise<boolean> {
    const { token, port } = this.config.metrics;
    if (token !== undefined && port === undefined && isMetricsTokenValid(authorization, token)) return true;
    request.client = await this.clients.authenticate(key);
    return request.client !== undefined;
  }

  private refuse(reply: FastifyReply, seconds: number): void {
    this.minute.refused++;
    this.countMinute();
    sendProblem(reply, problems.rateLimited(seconds, 'Too many failed authentications from this address. Retry after Retry-After seconds.'));
  }

  /** Starts counting a minute, unless one is being counted. */
  private countMinute(): void {
    this.summaryTimer ??= this.startSummaryTimer();
  }

  /**
   * Bound to the context the limiter was made in: a timer started during a
   * request would otherwise carry that request's context (and its id into the
   * summary line).
   */
  private readonly startSummaryTimer = AsyncResource.bind(() => setTimeout(() => this.writeSummary(), WINDOW_MS).unref());
}

/**
 * The client's address of a request: Fastify's `request.ip`, which is the
 * peer's address, or with TRUST_PROXY the address a trusted proxy forwarded.
 */
export function remoteAddress(req: { ip?: string }): string {
  return req.ip ?? 'unknown';
}
