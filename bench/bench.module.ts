import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { Body, Controller, Module, Post, Res } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { AuthenticatedClient } from '../src/auth/authenticated-client';
import { CurrentClient } from '../src/auth/current-client.decorator';
import type { ResponseHeaders } from '../src/http/http';
import { Idempotent, Operation } from 'safe-retries';
import { IdempotencyStore } from '../packages/idempotency/src/contract/idempotency.store';
import { LeaseKeeper } from '../packages/idempotency/src/core/lease-keeper';
import { OperationAttempt } from '../packages/idempotency/src/core/operation-attempt';
import { PhasedOperation as InternalPhasedOperation } from '../packages/idempotency/src/core/phased-operation';
import { oneCommitStatements } from '../packages/idempotency/src/stores/postgres/one-commit-statements';
import { keyId } from '../packages/idempotency/src/contract/key-id';
import { CreateOrderDto } from '../src/orders/dto/create-order.dto';
import { OrderResponse } from '../src/orders/dto/order.response';
import { OrdersModule } from '../src/orders/orders.module';
import { OrdersService } from '../src/orders/orders.service';
import { CreatePaymentDto } from '../src/payments/model/dto/create-payment.dto';
import { PaymentResponse } from '../src/payments/model/dto/payment.response';
import { PaymentsModule } from '../src/payments/payments.module';
import { PAYMENT_OPERATION, PaymentOperation } from '../src/payments/model/payment-operations';
import { PaymentsService } from '../src/payments/charges/payments.service';

/** A store that keeps nothing: the phases run, with no key to fence or store. */
function noKeyStore(txHost: TransactionHost<TransactionalAdapterTypeOrm>): IdempotencyStore {
  return {
    claim: () => Promise.reject(new Error('no claims here')),
    complete: async () => undefined,
    release: async () => undefined,
    renew: async (owner) => owner.token,
    outcome: async () => ({ state: 'unknown' }),
    runUnit: (work) => txHost.withTransaction(work),
    inUnit: () => txHost.isTransactionActive(),
    recovery: {
      checkpoint: async () => undefined,
      discard: async () => undefined,
      takeOver: async () => null,
    },
  };
}

/**
 * Exists only in the bench app: POST /payments without @Idempotent().
 * - /bench/payments: the same guard, validation, service and phases as the real
 *   route, minus the claim and the stored response, so the two routes' ratio is
 *   the price of exactly-once.
 * - /bench/pool-bound-payments: the same work in ONE transaction that stays open
 *   across the card network call (the design before phases): its connection and
 *   the order's lock are held while the network answers. The baseline of §7.
 */
@Controller('bench')
export class UnprotectedPaymentsController {
  constructor(
    private readonly payments: PaymentsService,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
  ) {}

  /** The payment's phases with no key: a lease that nothing can take, stopped when the work ends. */
  private async unprotected<T>(clientId: string, work: (op: PaymentOperation) => Promise<T>): Promise<T> {
    const store = noKeyStore(this.txHost);
    const lease = new LeaseKeeper({ scope: clientId, key: 'bench', id: keyId(clientId, 'bench'), token: '0', retentionMs: 0 }, store, 3_600_000);
    // The library's own class, reached by path: the app's type of it is the installed package's.
    const op = new InternalPhasedOperation(new OperationAttempt(lease, store, null), PAYMENT_OPERATION, 201) as unknown as PaymentOperation;
    try {
      return await work(op);
    } finally {
      await lease.stop();
    }
  }

  @Post('payments')
  async create(
    @CurrentClient() client: AuthenticatedClient,
    @Body() dto: CreatePaymentDto,
    @Res({ passthrough: true }) res: ResponseHeaders,
  ): Promise<PaymentResponse> {
    const payment = await this.unprotected(client.id, (op) => this.payments.create(client.id, dto, op));
    res.header('Location', `/payments/${payment.id}`); // 201: a POST's default status
    return payment;
  }

  @Post('pool-bound-payments')
  async createPoolBound(
    @CurrentClient() client: AuthenticatedClient,
    @Body() dto: CreatePaymentDto,
    @Res({ passthrough: true }) res: ResponseHeaders,
  ): Promise<PaymentResponse> {
    // Every phase joins this outer transaction (the default propagation).
    const payment = await this.txHost.withTransaction(() => this.unprotected(client.id, (op) => this.payments.create(client.id, dto, op)));
    res.header('Location', `/payments/${payment.id}`); // 201: a POST's default status
    return payment;
  }
}

/**
 * POST /payments with `@Idempotent({ wait: '2s' })`: the same phased route, but a
 * duplicate of a payment in progress waits for its replay instead of 409 (§7's
 * wait pile-up).
 */
@Controller('bench')
export class WaitingPaymentsController {
  constructor(private readonly payments: PaymentsService) {}

  @Post('waiting-payments')
  @Idempotent({ phased: PAYMENT_OPERATION, wait: '2s' })
  create(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreatePaymentDto, @Operation() op: PaymentOperation): Promise<PaymentResponse> {
    return this.payments.create(client.id, dto, op);
  }
}

/** The one-commit statements on the app's keys table, sent by a handler itself (§11). */
const ONE_COMMIT_SQL = oneCommitStatements('"idempotency_keys"');
const FIVE_STATEMENTS_LEASE_MS = '30000';
const FIVE_STATEMENTS_RETENTION_MS = 86_400_000;

/**
 * POST /orders's handler (one INSERT) four more ways, for §11's cost of a new
 * key (bench/request-cost.ts): with no key, autocommitted (the ceiling); with
 * no key, in a transaction of its own (what opening one costs); the five
 * statements of a one-commit key sent by the handler itself, with none of the
 * library's work around them (what the statements cost on this stack); and
 * with the durable claim. The app's POST /orders is the fifth: `commit: 'one'`.
 */
@Controller('bench')
export class CostedOrdersController {
  constructor(
    private readonly orders: OrdersService,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
  ) {}

  @Post('orders')
  create(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateOrderDto): Promise<OrderResponse> {
    return this.orders.create(client.id, dto);
  }

  @Post('transaction-orders')
  createInTransaction(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateOrderDto): Promise<OrderResponse> {
    return this.txHost.withTransaction(() => this.orders.create(client.id, dto));
  }

  @Post('five-statement-orders')
  createWithFiveStatements(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateOrderDto): Promise<OrderResponse> {
    const id = randomUUID();
    const fingerprint = Buffer.alloc(16);
    return this.txHost.withTransaction(async () => {
      // Prepared, on the transaction's own client, as the library sends them.
      const pg = (await this.txHost.tx.queryRunner!.connect()) as PoolClient;
      await pg.query({ name: 'bench_claim', text: ONE_COMMIT_SQL.claim, values: [id, fingerprint, FIVE_STATEMENTS_LEASE_MS] });
      const order = await this.orders.create(client.id, dto);
      const values = [id, fingerprint, 201, JSON.stringify(order), null, FIVE_STATEMENTS_RETENTION_MS];
      await pg.query({ name: 'bench_key', text: ONE_COMMIT_SQL.complete, values });
      return order;
    });
  }

  @Post('durable-orders')
  @Idempotent({ commit: 'durable' })
  createDurable(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateOrderDto): Promise<OrderResponse> {
    return this.orders.create(client.id, dto);
  }
}

@Module({ imports: [PaymentsModule, OrdersModule], controllers: [UnprotectedPaymentsController, WaitingPaymentsController, CostedOrdersController] })
export class BenchModule {}
