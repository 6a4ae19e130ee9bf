import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventsModule } from '../events/events.module';
import { OrdersModule } from '../orders/orders.module';
import { CardNetworkModule } from './card-network/card-network.module';
import { ChargeAdmission } from './charge-admission';
import { PaymentEntity } from './payment.entity';
import { PaymentsController } from './payments.controller';
import { PaymentsRepository } from './payments.repository';
import { NetworkCalls } from './payment-operations';
import { NetworkContradictions } from './network-contradictions';
import { AttentionRepository } from './attention.repository';
import { OperationAttention } from './operation-attention';
import { PaymentsService } from './payments.service';
import { PaymentCharge } from './payment-charge';
import { PaymentRecords } from './payment-records';
import { RefundRecords } from './refund-records';
import { PaymentStart } from './payment-start';
import { RefundSettlementCursors } from './refund-settlement.cursor';
import { RefundSettlementJob } from './refund-settlement.job';
import { RefundsService } from './refunds.service';
import { RefundEntity } from './refund.entity';
import { CardNetworkWebhooksController } from './webhooks/card-network-webhooks.controller';
import { CardNetworkWebhooks } from './webhooks/card-network-webhooks.service';
import { WebhookSignatureLimiter } from './webhooks/webhook-signature.limiter';

@Module({
  imports: [TypeOrmModule.forFeature([PaymentEntity, RefundEntity]), OrdersModule, CardNetworkModule, EventsModule],
  controllers: [PaymentsController, CardNetworkWebhooksController],
  // ChargeAdmission's hook is installed by configureApp (a Fastify hook, app-wide, acting on @ChargeRoute() routes).
  providers: [
    PaymentsService,
    PaymentStart,
    PaymentCharge,
    PaymentRecords,
    RefundRecords,
    RefundsService,
    NetworkCalls,
    OperationAttention,
    AttentionRepository,
    RefundSettlementJob,
    RefundSettlementCursors,
    PaymentsRepository,
    ChargeAdmission,
    CardNetworkWebhooks,
    NetworkContradictions,
    WebhookSignatureLimiter,
  ],
  exports: [PaymentsService, ChargeAdmission, OperationAttention],
})
export class PaymentsModule {}
