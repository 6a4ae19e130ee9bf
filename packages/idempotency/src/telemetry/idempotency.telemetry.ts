import { channel } from 'node:diagnostics_channel';
import { Attributes, Span, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { ClsServiceManager } from 'nestjs-cls';
import type { ScopedKey } from '../contract/idempotency.store';

/**
 * What the module tells observers, in two ways that cost nothing when no one
 * listens:
 * - OpenTelemetry spans, through `@opentelemetry/api` only (a no-op until the
 *   app registers an SDK): `idempotency.request` around a request's claim and
 *   work, with `idempotency.claim`, `idempotency.checkpoint <point>`,
 *   `idempotency.finish`, `idempotency.release` and `idempotency.call <name>`
 *   (each call to the outside world) inside it, and `idempotency.recovery`
 *   around an operation the recovery job resumes. Outcomes (replayed, in
 *   progress, mismatch, taken over, lease lost, released, yielded, held,
 *   failed) are span events.
 * - The same outcomes on `node:diagnostics_channel`, channel
 *   IDEMPOTENCY_EVENTS_CHANNEL, for apps without OpenTelemetry.
 * Every span and event carries the scope, the key's id (`keyId`, a hash: the
 * key itself never leaves the module) and the operation (a phased route's
 * name, or the route's path). That subject is kept in nestjs-cls's context
 * (the one the module's requests run in), not in an AsyncLocalStorage of its
 * own: each storage a process enables costs every promise it creates.
 */
export const IDEMPOTENCY_EVENTS_CHANNEL = 'safe-retries:idempotency';

export type IdempotencyEventName =
  | 'claimed'
  | 'replayed'
  | 'in_progress'
  | 'mismatch'
  | 'taken_over'
  | 'lease_lost'
  | 'released'
  | 'yielded'
  | 'held'
  | 'recovered'
  | 'failed';

/** What a subscriber of IDEMPOTENCY_EVENTS_CHANNEL receives. */
export interface IdempotencyEvent {
  name: IdempotencyEventName;
  scope: string;
  keyId: string;
  operation: string;
  /** What ended the request: on `failed`, `released`, `yielded` and `lease_lost`. */
  error?: unknown;
}

type Subject = Omit<IdempotencyEvent, 'name' | 'error'>;

const events = channel(IDEMPOTENCY_EVENTS_CHANNEL);
const tracer = trace.getTracer('safe-retries');
const SUBJECT = Symbol('idempotency.subject');

/** The subject of the current operation (see aboutOperation), if any. */
function subjectNow(): Subject | undefined {
  const cls = ClsServiceManager.getClsService();
  return cls.isActive() ? cls.get<Subject | undefined>(SUBJECT) : undefined;
}

function attributes(subject: Subject): Attributes {
  return { 'idempotency.scope': subject.scope, 'idempotency.key_id': subject.keyId, 'idempotency.operation': subject.operation };
}

/** The subject of the spans and events of `work`: the operation at the key. */
export function aboutOperation<T>(at: ScopedKey, operation: string, work: () => T): T {
  const cls = ClsServiceManager.getClsService();
  // A context of its own that inherits the caller's values: the subject ends with `work`.
  return cls.run({ ifNested: 'inherit' }, () => {
    cls.set(SUBJECT, { scope: at.scope, keyId: at.id, operation } satisfies Subject);
    return work();
  });
}

/** An outcome of the current operation (with the error that ended it): an event of the active span and of the diagnostics channel. */
export function emit(name: IdempotencyEventName, error?: unknown): void {
  const subject = subjectNow();
  if (!subject) return;
  trace.getActiveSpan()?.addEvent(`idempotency.${name}`);
  if (events.hasSubscribers) events.publish({ name, ...subject, ...(error === undefined ? {} : { error }) } satisfies IdempotencyEvent);
}

/** `work` in a span of its own, a child of the active one, with the operation's attributes. */
export function inSpan<T>(name: string, work: () => Promise<T>): Promise<T> {
  const subject = subjectNow();
  return tracer.startActiveSpan(name, { attributes: subject ? attributes(subject) : {} }, async (span) => {
    try {
      return await work();
    } catch (error) {
      fail(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * A span that outlives the call that starts it (a request whose answer is an
 * Observable): `run` starts its work inside it; `end` closes it.
 */
export function openSpan(name: string): { run<T>(work: () => T): T; end(error?: unknown): void } {
  const subject = subjectNow();
  const span = tracer.startSpan(name, { attributes: subject ? attributes(subject) : {} });
  const active = trace.setSpan(context.active(), span);
  return {
    run: (work) => context.with(active, work),
    end: (error) => {
      if (error !== undefined) fail(span, error);
      span.end();
    },
  };
}

function fail(span: Span, error: unknown): void {
  if (error instanceof Error) span.recordException(error);
  span.setStatus({ code: SpanStatusCode.ERROR });
}
