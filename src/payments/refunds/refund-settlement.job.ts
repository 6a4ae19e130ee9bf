import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsService } from 'nestjs-cls';
import { randomUUID } from 'node:crypto';
import type { AppConfig } from '../../config/config';
import { APP_CONFIG } from '../../config/config.module';
import { CardNetwork, RefundState, UnknownNetworkObjectError } from '../card-network/card-network';
import { NetworkCalls } from '../model/payment-operations';
import { PaymentsRepository, PendingRefund, RefundCursor } from '../model/payments.repository';
import { RefundSettlementCursors, SettlementWalk } from './refund-settlement.cursor';
import { RefundsService } from './refunds.service';

/** The name of the job's interval in SchedulerRegistry. */
export const REFUND_SETTLEMENT_JOB_NAME = 'refund-settlement';
/** Refunds asked about per run and walk (pending, succeeded), by the whole fleet. */
const BATCH = 100;

/**
 * How long after it was made a succeeded refund is still asked about: a card
 * refund the network answered `succeeded` can still fail later, when the
 * cardholder's bank returns it (a closed or lost card), and only its webhook
 * would tell. Thirty days covers the late failures card networks report; past
 * it a refund is taken as settled.
 */
export const LATE_FAILURE_WINDOW_MS = 30 * 24 * 60 * 60_000;

/**
 * How many recovery intervals the fleet's cursor is leased for. The holder
 * renews the lease at each of its ticks and after each refund it asks about,
 * so two intervals leave a whole tick of slack (a late timer, a slow answer)
 * before another instance may take the walk over, and a crashed holder's walk
 * goes on within two intervals.
 */
const CURSOR_LEASE_INTERVALS = 2;

export interface RefundSettlementResult {
  /** Whether this instance held the fleet's cursor and walked (false: another instance walks, or a run was still going here). */
  walked: boolean;
  checked: number;
  settled: number;
  /** Could not be asked about (the network unreachable, or it does not know the refund): tried again next walk. */
  failed: number;
}

/**
 * Refunds converge without the webhook too: every recovery interval (with the
 * recovery job, IDEMPOTENCY_JOBS) the fleet asks the network about up to
 * BATCH pending refunds and up to BATCH succeeded ones made within
 * LATE_FAILURE_WINDOW_MS, and records what has moved (pending -> succeeded or
 * failed, succeeded -> failed, the amount given back). Each kind is walked
 * from a cursor, oldest first, that starts again from the oldest once it has
 * passed the newest: refunds the network never settles (or no longer knows)
 * cannot keep the others from being asked.
 *
 * One cursor for the fleet. Every instance ticks, but the cursor is one row
 * in the database (RefundSettlementCursors) under a lease on the database's
 * clock: the instance that holds it walks, the others skip their tick, so the
 * network reads per interval are one walk's whatever the number of instances.
 * The holder renews the lease at each tick and moves the cursor after each
 * refund it asked about, in one fenced statement: a holder whose lease was
 * taken over stops before its next network call. A crashed holder's lease
 * expires and another instance goes on from the stored cursor; a stopped one
 * gives the lease up; a deploy goes on where the fleet was, not from the
 * oldest. The question goes out with no transaction open (a slow network
 * holds no connection); the answer is applied in a short transaction that
 * moves only a refund still where it was read with that network id, so a
 * refund asked about twice (a walk taken over mid-refund), or a webhook at
 * the same moment, is applied once.
 */
@Injectable()
export class RefundSettlementJob implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('RefundSettlement');
  private inFlight?: Promise<RefundSettlementResult>;
  /** This instance's name on the cursor's lease. */
  private readonly holder = randomUUID();
  /** Whether this instance has ever held the lease (only then is there one to give up). */
  private held = false;
  /** Set at shutdown: the run stops after the refund it is asking about (the cursor keeps its place). */
  private stopping = false;

  constructor(
    private readonly payments: PaymentsRepository,
    private readonly cursors: RefundSettlementCursors,
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
    this.stopping = true;
    await this.inFlight?.catch(() => undefined);
    if (!this.held) return;
    // Another instance goes on at its next tick instead of after the lease; unreachable, the lease expires by itself.
    await this.cls.run(() => this.cursors.release(this.holder)).catch((error: Error) => this.logger.warn(`cannot give up the refund settlement lease: ${error.message}`));
  }

  private async runScheduled(): Promise<void> {
    try {
      await this.runOnce();
    } catch (error) {
      this.logger.error(`refund settlement run failed: ${(error as Error).message}`);
    }
  }

  /** One run: the next refunds of each walk, if this instance holds (or takes) the fleet's cursor. */
  runOnce(): Promise<RefundSettlementResult> {
    if (this.inFlight) return Promise.resolve({ walked: false, checked: 0, settled: 0, failed: 0 });
    const run = this.cls.run(() => this.run()).finally(() => {
      this.inFlight = undefined;
    });
    this.inFlight = run;
    return run;
  }

  private get leaseMs(): number {
    return CURSOR_LEASE_INTERVALS * this.config.idempotency.recovery.interval;
  }

  private async run(): Promise<RefundSettlementResult> {
    const result: RefundSettlementResult = { walked: false, checked: 0, settled: 0, failed: 0 };
    const cursors = await this.cursors.claim(this.holder, this.leaseMs);
    if (!cursors) return result;
    this.held = true;
    result.walked = true;
    for (const walk of ['pending', 'succeeded'] as const) {
      const ended = await this.walk(walk, cursors[walk], result);
      if (ended === 'lost') this.logger.warn('refund settlement: another instance took the cursor over (this lease had expired); this run stops');
      if (ended !== 'done') break;
    }
    if (result.settled || result.failed) this.logger.log(`refund settlement: ${JSON.stringify(result)}`);
    return result;
  }

  /**
   * The next batch of one walk after `after`, the cursor moved past each
   * refund: `lost` when the lease was, `stopped` at shutdown.
   */
  private async walk(walk: SettlementWalk, after: RefundCursor | null, result: RefundSettlementResult): Promise<'done' | 'lost' | 'stopped'> {
    const batch = await this.payments.refundsToSettle(walk, BATCH, after, LATE_FAILURE_WINDOW_MS);
    for (const refund of batch) {
      if (this.stopping) return 'stopped';
      await this.check(refund, walk, result);
      if (!(await this.cursors.advance(this.holder, this.leaseMs, walk, refund))) return 'lost';
    }
    // A short batch reached the newest: the next run starts from the oldest again.
    if (batch.length < BATCH && !(await this.cursors.advance(this.holder, this.leaseMs, walk, null))) return 'lost';
    return 'done';
  }

  /** Asks the network about one refund and applies what has moved since it was read (`walk`: its status then). */
  private async check(refund: PendingRefund, walk: SettlementWalk, result: RefundSettlementResult): Promise<void> {
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
