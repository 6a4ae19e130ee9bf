import { Injectable, Logger } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { PhasedOperation } from 'safe-retries';
import { MetricsService } from '../../metrics/metrics.service';
import { CardNetworkRefusedError, CardNetworkUnavailableError, UnknownNetworkObjectError } from '../card-network/card-network';
import { AttentionDecision, AttentionOperation, AttentionReason, AttentionRepository, AttentionRow } from './attention.repository';
import { settledByAnother } from '../model/payment-operations';
import { RequiresAttentionException } from '../model/payments.errors';

/** The recovery point of an operation handed to a person: only an operator's decision (or the network's own event) moves it on. */
export const ATTENTION = 'attention';

/**
 * How long an operation handed to a person is left alone between looks: its
 * lease is held this long, so a retry answers 409 and the recovery job passes
 * it by; then the next attempt (the recovery job, a retry) looks for an
 * operator's decision, with no call to the card network and no log line, and
 * holds it again. An operator's decision is applied within this (plus one
 * recovery interval).
 */
export const ATTENTION_HOLD_MS = 60_000;

/**
 * An operation whose outcome is still unknown this long after its record was
 * made (the database's clock) is not retried on its own any more: a payment
 * with no intent recorded is released (nothing can have been charged), any
 * other is handed to a person. A day: far past any send still in flight and
 * any outage the retries are for, and the card network's own key window.
 */
export const STUCK_BOUND_MS = 24 * 60 * 60_000;


/** Why an operation was handed over: the network refuses every resume, or it stayed unknown past STUCK_BOUND_MS. */
export type HandOverReason = Exclude<AttentionReason, 'contradicted'>;

/** What a phased operation saves at ATTENTION, beside its own state. */
export interface AttentionState {
  attention_id?: string;
}

/**
 * Operations handed to a person (operation_attention): the hand-over, with its
 * evidence, in the same transaction as the record's move to
 * `requires_attention` and the ATTENTION recovery point; the operator's
 * decision, recorded by the command line and applied by whoever next holds
 * the operation's key (so it is fenced like any resume); the metrics.
 */
@Injectable()
export class OperationAttention {
  private readonly logger = new Logger('Attention');
  private readonly handedOver: Counter<'operation' | 'reason'>;
  private readonly released: Counter<'operation' | 'reason'>;
  private readonly resolved: Counter<'operation' | 'resolution'>;
  private readonly contradictions: Counter<'operation'>;

  constructor(
    private readonly repository: AttentionRepository,
    metrics: MetricsService,
  ) {
    const registers = [metrics.registry];
    this.handedOver = new Counter({
      name: 'operations_requiring_attention_total',
      help: 'Payments and refunds handed to a person (requires_attention), by reason (refused: the card network refuses every resume; stuck: unknown past the bound)',
      labelNames: ['operation', 'reason'],
      registers,
    });
    this.released = new Counter({
      name: 'operations_stuck_released_total',
      help: 'Payments with no intent recorded released (nothing can have been charged), by reason (refused, stuck)',
      labelNames: ['operation', 'reason'],
      registers,
    });
    this.resolved = new Counter({
      name: 'operations_attention_resolved_total',
      help: 'Hand-overs ended, by resolution (failed, reasked, found_at_network, network_event, acknowledged)',
      labelNames: ['operation', 'resolution'],
      registers,
    });
    this.contradictions = new Counter({
      name: 'card_network_contradictions_total',
      help: "Events of the card network that contradict a final record (a charge for a payment held failed, a refund made for one held failed): each opens a hand-over (contradicted) for a person",
      labelNames: ['operation'],
      registers,
    });
    new Gauge({
      name: 'operations_requiring_attention',
      help: 'Payments and refunds waiting for a person now',
      labelNames: ['operation'],
      registers,
      collect: async function (this: Gauge<'operation'>) {
        // With the database down /metrics still answers (the health metrics say why): the last counts stand.
        const open = await repository.countOpen().catch(() => undefined);
        if (!open) return;
        for (const operation of ['payment', 'refund'] as const) this.set({ operation }, open.find((o) => o.operation === operation)?.n ?? 0);
      },
    });
  }

  /**
   * Hands the operation to a person: `mark` moves its record to
   * requires_attention (false: it was no longer where this attempt left it),
   * the hand-over is recorded with its evidence, the operation stands at
   * ATTENTION, and its lease is held for ATTENTION_HOLD_MS. Throws the 409
   * the request answers.
   */
  async handOver<S extends AttentionState>(
    op: PhasedOperation<S>,
    what: { operation: AttentionOperation; recordId: string; reason: HandOverReason; evidence: string },
    mark: () => Promise<boolean>,
  ): Promise<never> {
    const row = await op.checkpoint(
      ATTENTION,
      async () => {
        if (!(await mark())) throw settledByAnother();
        return this.repository.open(op.scope, { operation: what.operation, recordId: what.recordId, key: op.key, reason: what.reason, evidence: what.evidence });
      },
      (r) => ({ ...(op.state as S), attention_id: r.id }),
    );
    this.handedOver.inc({ operation: what.operation, reason: what.reason });
    this.logger.error(`${what.operation} ${what.recordId} (client ${op.scope}) requires attention (${what.reason}): ${what.evidence}; attention id ${row.id}`);
    await op.holdOff(ATTENTION_HOLD_MS);
    throw new RequiresAttentionException(what.operation, what.recordId, row.id, ATTENTION_HOLD_MS / 1000);
  }

  /** The operator's decision on the operation's open hand-over: null while there is none (the lease is then held again). */
  async decisionFor(op: PhasedOperation<AttentionState>): Promise<{ row: AttentionRow; decision: AttentionDecision } | null> {
    const id = op.state?.attention_id;
    const row = id ? await this.repository.find(op.scope, id) : undefined;
    if (!row) throw new Error(`operation at ${ATTENTION} without its hand-over (${id})`);
    if (row.decision && row.resolved_at === null) return { row, decision: row.decision };
    await op.holdOff(ATTENTION_HOLD_MS);
    return null;
  }

  /**
   * An operator's decision that cannot be applied yet: the card network, which
   * alone can say what became of the operation's object, could not be asked
   * (`error`: refused, unreachable, or it does not know the object). Nothing
   * moves; the hand-over says why it waits, the lease is held again, and the
   * next look (the recovery job, a retry) tries again. Any other error is not
   * the network's and is thrown.
   */
  async waitForNetwork(op: PhasedOperation<AttentionState>, row: AttentionRow, error: unknown): Promise<undefined> {
    if (!(error instanceof CardNetworkRefusedError || error instanceof CardNetworkUnavailableError || error instanceof UnknownNetworkObjectError)) throw error;
    const why = `${row.decision} waits for the card network, which could not be asked about ${row.operation} ${row.record_id}: ${error.message}`;
    await this.repository.wait(op.scope, row.id, why);
    this.logger.warn(`${why} (attention id ${row.id}; tried again within ${ATTENTION_HOLD_MS / 1000} s)`);
    await op.holdOff(ATTENTION_HOLD_MS);
    return undefined;
  }

  /**
   * The network's event contradicts a final record: surfaced for a person
   * (a hand-over `contradicted`, an error log line, a metric), never dropped.
   * Counted and logged for every such event; the hand-over is opened once per
   * record. Runs in the event's transaction.
   */
  async contradicted(clientId: string, what: { operation: AttentionOperation; recordId: string; key: string | null; evidence: string }): Promise<void> {
    const row = await this.repository.openContradiction(clientId, what);
    this.contradictions.inc({ operation: what.operation });
    this.logger.error(
      `${what.operation} ${what.recordId} (client ${clientId}) is contradicted by the card network: ${what.evidence}; ` +
        (row ? `attention id ${row.id}` : 'a hand-over for it is already open'),
    );
  }

  /** Ends the hand-over in the current phase's transaction; counted once it commits (see `counted`). */
  async resolve(clientId: string, row: Pick<AttentionRow, 'id'>, resolution: string): Promise<void> {
    if (!(await this.repository.resolve(clientId, row.id, resolution))) throw settledByAnother();
  }

  counted(operation: AttentionOperation, resolution: string): void {
    this.resolved.inc({ operation, resolution });
  }

  /** A payment released because nothing can have been charged. */
  releasedPayment(paymentId: string, clientId: string, reason: HandOverReason, evidence: string): void {
    this.released.inc({ operation: 'payment', reason });
    this.logger.warn(`payment ${paymentId} (client ${clientId}) released, no intent was ever recorded (${reason}): ${evidence}`);
  }

  pastBound(operation: AttentionOperation, clientId: string, recordId: string): Promise<boolean> {
    return this.repository.pastBound(operation, clientId, recordId, STUCK_BOUND_MS);
  }

  /** The open hand-over of the client's operation under `key`: a retry will not resume it. */
  openForKey(clientId: string, key: string): Promise<AttentionRow | undefined> {
    return this.repository.openForKey(clientId, key);
  }

  // The operator's side (the command line).

  listOpen(limit: number, after?: { clientId: string; id: string }): Promise<AttentionRow[]> {
    return this.repository.listOpen(limit, after);
  }

  find(id: string): Promise<AttentionRow | undefined> {
    return this.repository.findById(id);
  }

  /** Records an operator's decision (audited: who, when, why); applied by the operation's next attempt. */
  decide(id: string, decision: AttentionDecision, by: string, reason: string | null): Promise<AttentionRow | undefined> {
    return this.repository.decide(id, decision, by, reason);
  }
}
