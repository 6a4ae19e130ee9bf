import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsService } from 'nestjs-cls';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { CardNetwork, RefundState, UnknownNetworkObjectError } from './card-network/card-network';
import { NetworkCalls } from './payment-operations';
import { PaymentsRepository, PendingRefund, RefundCursor } from './payments.repository';
import { RefundsService } from './refunds.service';

/** The name of the job's interval in SchedulerRegistry. */
export const REFUND_SETTLEMENT_JOB_NAME = 'refund-settlement';
/** Refunds asked about per run and walk (pending, succeeded). */
const BATCH = 100;

/**
 * How long after it was made a succeeded refund is still asked about: a card
 * refund the network answered `succeeded` can still fail later, when the
 * cardholder's bank returns it (a closed or lost card), and only its webhook
 * would tell. Thirty days covers the late failures card networks report; past
 * it a refund is taken as settled.
 */
export const LATE_FAILURE_WINDOW_MS = 30 * 24 * 60 * 60_000;

export interface RefundSettlementResult {
  checked: number;
  settled: number;
  /** Could not be asked about (the network unreachable, or it does not know the refund): tried again next run. */
  failed: number;
}

/**
 * Refunds converge without the webhook too: every recovery interval (with the
 * recovery job, IDEMPOTENCY_JOBS) each instance asks the
 * network about up to BATCH pending refunds and up to BATCH succeeded ones
 * made within LATE_FAILURE_WINDOW_MS, and records what has moved (pending ->
 * succeeded or failed, succeeded -> failed, the amount given back). Each kind
 * is walked from a cursor, oldest first, that starts again from the oldest
 * once it has passed the newest: refunds the network never settles (or no
 * longer knows) cannot keep the others from being asked. The cursor is this
 * process's; after a restart the walk begins again. The question goes out
 * with no transaction open (a slow network holds no connection); the answer
 * is applied in a short transaction that moves only a refund still where it
 * was read with that network id, so two instances, or a webhook at the same
 * moment, apply it once.
 */
@Injectable()
export class RefundSettlementJob implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('RefundSettlement');
  private inFlight?: Promise<RefundSettlementResult>;
  private readonly cursors: Record<'pending' | 'succeeded', RefundCursor | null> = { pending: null, succeeded: null };

  constructor(
    private readonly payments: PaymentsRepository,
    private readonly refunds: RefundsService,
    private readonly cardNetwork: CardNetwork,
    private readonly network: NetworkCalls,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly cls: ClsService,
    private readonly scheduler: SchedulerRegistry,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    const { enabled, interval } = this.config.idempotency.recovery;
    if (!enabled) return;
    this.scheduler.addInterval(REFUND_SETTLEMENT_JOB_NAME, setInterval(() => void this.runScheduled(), interval));
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (this.scheduler.doesExist('interval', REFUND_SETTLEMENT_JOB_NAME)) this.scheduler.deleteInterval(REFUND_SETTLEMENT_JOB_NAME);
    await this.inFlight?.catch(() => undefined);
  }

  private async runScheduled(): Promise<void> {
    try {
      await this.runOnce();
    } catch (error) {
      this.logger.error(`refund settlement run failed: ${(error as Error).message}`);
    }
  }

  /** One run: the next refunds of each walk. */
  runOnce(): Promise<RefundSettlementResult> {
    if (this.inFlight) return Promise.resolve({ checked: 0, settled: 0, failed: 0 });
    const run = this.cls.run(() => this.run()).finally(() => {
      this.inFlight = undefined;
    });
    this.inFlight = run;
    return run;
  }

  private async run(): Promise<RefundSettlementResult> {
    const result: RefundSettlementResult = { checked: 0, settled: 0, failed: 0 };
    for (const walk of ['pending', 'succeeded'] as const) {
      const batch = await this.payments.refundsToSettle(walk, BATCH, this.cursors[walk], LATE_FAILURE_WINDOW_MS);
      // A short batch reached the newest: the next run starts from the oldest again.
      this.cursors[walk] = batch.length === BATCH ? batch[batch.length - 1] : null;
      for (const refund of batch) await this.check(refund, walk, result);
    }
    if (result.settled || result.failed) this.logger.log(`refund settlement: ${JSON.stringify(result)}`);
    return result;
  }

  /** Asks the network about one refund and applies what has moved since it was read (`walk`: its status then). */
  private async check(refund: PendingRefund, walk: 'pending' | 'succeeded', result: RefundSettlementResult): Promise<void> {
    result.checked++;
    let state: RefundState;
    try {
      state = await this.cardNetwork.retrieveRefund(refund.network_refund_id);
    } catch (error) {
      result.failed++;
      if (error instanceof UnknownNetworkObjectError) {
        const ids = { refund_id: refund.id, network_refund_id: refund.network_refund_id, client_id: refund.client_id };
        this.network.reportUnknown('refund', ids, `left ${walk} for an operator (asked again in the next walk)`);
      } else {
        this.logger.warn(`cannot ask about refund ${refund.id} (${refund.network_refund_id}): ${(error as Error).message}`);
      }
      return;
    }
    if (state.status === 'pending' || state.status === walk || !this.isOurs(refund, state)) return;
    const to = state.status === 'succeeded' ? { status: 'succeeded' as const } : { status: 'failed' as const, failureReason: state.failureReason ?? null };
    if (await this.txHost.withTransaction(() => this.refunds.settle(refund.client_id, refund.id, refund.network_refund_id, to))) result.settled++;
  }

  private isOurs(pending: PendingRefund, state: RefundState): boolean {
    if (state.refundId === pending.network_refund_id && state.metadata.refund_id === pending.id) return true;
    this.logger.error(`the card network's refund ${state.refundId} does not name our refund ${pending.id}; left as it is`);
    return false;
  }
}
