import { Inject, Injectable } from '@nestjs/common';
import { Counter, Histogram, Registry } from 'prom-client';
import { IDEMPOTENCY_REGISTRY } from '../config/idempotency.options';
import { emit } from './idempotency.telemetry';
import type { AttemptEnd } from '../contract/attempt-end';

export type IdempotencyOutcome =
  | 'claimed'
  | 'replayed'
  | 'in_progress'
  | 'mismatch'
  | 'lease_lost'
  | 'taken_over'
  | 'released'
  /** A phased request failed after a recovery point: key kept, lease given up. */
  | 'yielded'
  /** The claim itself failed (the store's error): the request has no other outcome. */
  | 'failed';

/** What became of an operation the recovery job resumed (`idempotency_recoveries_total{result}`). */
export type RecoveryResult = 'finished' | 'released' | 'held' | 'failed';

/**
 * The module's counters, and the one place where what happened to a request or
 * a recovered operation is recorded: counted here, and told to spans and the
 * diagnostics channel (idempotency.telemetry).
 */
@Injectable()
export class IdempotencyMetrics {
  readonly outcomes: Counter<'outcome'>;
  readonly claimDuration: Histogram;
  readonly replayCacheHits: Counter;
  readonly purgedKeys: Counter;
  readonly purgeDuration: Histogram;
  readonly purgeFailures: Counter;
  readonly recoveries: Counter<'result'>;
  readonly messages: Counter<'result'>;
  readonly purgedMessages: Counter;

  constructor(@Inject(IDEMPOTENCY_REGISTRY) registry: Registry) {
    const registers = [registry];
    this.outcomes = new Counter({
      name: 'idempotency_requests_total',
      help: 'Requests to @Idempotent() routes by outcome',
      labelNames: ['outcome'],
      registers,
    });
    this.claimDuration = new Histogram({
      name: 'idempotency_claim_duration_seconds',
      help: 'Latency of the claim-or-get round trip (including a takeover or replace)',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    });
    this.replayCacheHits = new Counter({
      name: 'idempotency_replay_cache_hits_total',
      help: 'Replays answered from memory, without the claim round trip (also counted as outcome "replayed")',
      registers,
    });
    this.purgedKeys = new Counter({ name: 'idempotency_purge_deleted_keys_total', help: 'Expired keys deleted by the purge job', registers });
    this.purgeDuration = new Histogram({
      name: 'idempotency_purge_run_duration_seconds',
      help: 'Duration of purge runs',
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120],
      registers,
    });
    this.purgedMessages = new Counter({
      name: 'idempotency_purge_deleted_messages_total',
      help: 'Processed messages past their retention deleted by the purge job',
      registers,
    });
    this.purgeFailures = new Counter({ name: 'idempotency_purge_failures_total', help: 'Purge runs that failed', registers });
    this.recoveries = new Counter({
      name: 'idempotency_recoveries_total',
      help: 'Abandoned phased operations driven on by the recovery job, by result (finished, released, held, failed, unknown_operation)',
      labelNames: ['result'],
      registers,
    });
    this.messages = new Counter({
      name: 'idempotency_messages_total',
      help: 'Messages given to IdempotentConsumer, by result (processed: the effect ran; duplicate: already processed, skipped)',
      labelNames: ['result'],
      registers,
    });
  }

  /** An outcome of a request: counted, and told as an event (with the error that ended the request, if any). */
  record(outcome: IdempotencyOutcome, error?: unknown): void {
    this.outcomes.inc({ outcome });
    emit(outcome, error);
  }

  /** How a request's attempt ended (see OperationAttempt.settle), and the error that ended it. */
  requestEnded(end: AttemptEnd, error?: unknown): void {
    switch (end.kind) {
      case 'lease_lost':
        return this.record('lease_lost', error);
      case 'gave_up':
        if (end.given) this.record(end.kept ? 'yielded' : 'released', error);
        return;
      case 'held':
        return emit('held');
      case 'finished':
      case 'released':
        return;
    }
  }

  /** How an attempt of the recovery job ended: its result, counted and told. */
  recoveryEnded(end: AttemptEnd): RecoveryResult {
    const result: RecoveryResult = end.kind === 'finished' || end.kind === 'released' || end.kind === 'held' ? end.kind : 'failed';
    this.recoveries.inc({ result });
    if (result === 'held') emit('held');
    if (result === 'finished' || result === 'released') emit('recovered');
    return result;
  }
}
