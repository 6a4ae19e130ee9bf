import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsService } from 'nestjs-cls';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { CardNetwork, RefundState, UnknownNetworkObjectError } from './card-network/card-network';
import { NetworkCalls } from './payment-operations';
import { PaymentsRepository, PendingRefund } from './payments.repository';
import { RefundsService } from './refunds.service';

/** The name of the job's interval in SchedulerRegistry. */
export const REFUND_SETTLEMENT_JOB_NAME = 'refund-settlement';
/** Pending refunds asked about per run, oldest first. */
const BATCH = 100;

export interface RefundSettlementResult {
  checked: number;
  settled: number;
  /** Could not be asked about (the network unreachable, or it does not know the refund): tried again next run. */
  failed: number;
}

/**
 * Pending refunds end without the webhook too: every recovery interval (with
 * the recovery job, IDEMPOTENCY_JOBS) each instance asks
 * the network about the oldest pending refunds and records what has settled.
 * The question goes out with no transaction open (a slow network holds no
 * connection); the answer is applied in a short transaction that moves only a
 * refund still pending with that network id, so two instances, or a webhook
 * at the same moment, apply it once.
 */
@Injectable()
export class RefundSettlementJob implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('RefundSettlement');
  private inFlight?: Promise<RefundSettlementResult>;

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

  /** One run over the oldest pending refunds. */
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
    for (const pending of await this.payments.pendingRefunds(BATCH)) {
      result.checked++;
      let state: RefundState;
      try {
        state = await this.cardNetwork.retrieveRefund(pending.network_refund_id);
      } catch (error) {
        result.failed++;
        if (error instanceof UnknownNetworkObjectError) {
          const ids = { refund_id: pending.id, network_refund_id: pending.network_refund_id, client_id: pending.client_id };
          this.network.reportUnknown('refund', ids, 'left pending for an operator (asked again next run)');
        } else {
          this.logger.warn(`cannot ask about refund ${pending.id} (${pending.network_refund_id}): ${(error as Error).message}`);
        }
        continue;
      }
      if (state.status === 'pending' || !this.isOurs(pending, state)) continue;
      const to = state.status === 'succeeded' ? { status: 'succeeded' as const } : { status: 'failed' as const, failureReason: state.failureReason ?? null };
      if (await this.txHost.withTransaction(() => this.refunds.settle(pending.client_id, pending.id, pending.network_refund_id, to))) result.settled++;
    }
    if (result.settled || result.failed) this.logger.log(`refund settlement: ${JSON.stringify(result)}`);
    return result;
  }

  private isOurs(pending: PendingRefund, state: RefundState): boolean {
    if (state.refundId === pending.network_refund_id && state.metadata.refund_id === pending.id) return true;
    this.logger.error(`the card network's refund ${state.refundId} does not name our refund ${pending.id}; left pending`);
    return false;
  }
}
