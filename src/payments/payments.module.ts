import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventsModule } from '../events/events.module';
import { OrdersModule } from '../orders/orders.module';
import { CardNetworkModule } from './card-network/card-network.module';
import { ChargeAdmission } from './admission/charge-admission';
import { PaymentEntity } from './model/payment.entity';
import { PaymentsController } from './charges/payments.controller';
import { PaymentsRepository } from './model/payments.repository';
import { NetworkCalls } from './model/payment-operations';
import { NetworkContradictions } from './card-network-webhooks/network-contradictions';
import { AttentionRepository } from './attention/attention.repository';
import { OperationAttention } from './attention/operation-attention';
import { PaymentsService } from './charges/payments.service';
import { PaymentCharge } from './charges/payment-charge';
import { PaymentConfirm } from './charges/payment-confirm';
import { PaymentFinish } from './charges/payment-finish';
import { PaymentRecords } from './model/payment-records';
import { RefundRecords } from './model/refund-records';
import { PaymentStart } from './charges/payment-start';
import { RefundSettlementCursors } from './refunds/refund-settlement.cursor';
import { RefundSettlementJob } from './refunds/refund-settlement.job';
import { RefundsController } from './refunds/refunds.controller';
import { RefundsService } from './refunds/refunds.service';
import { RefundEntity } from './model/refund.entity';
import { CardNetworkWebhooksController } from './card-network-webhooks/card-network-webhooks.controller';
import { CardNetworkWebhooks } from './card-network-webhooks/card-network-webhooks.service';
import { CardNetworkSignature } from './card-network-webhooks/card-network-signature';
import { RequestSignature } from '../auth/request-signature';

@Module({
  imports: [TypeOrmModule.forFeature([PaymentEntity, RefundEntity]), OrdersModule, CardNetworkModule, EventsModule],
  controllers: [PaymentsController, RefundsController, CardNetworkWebhooksController],
  // ChargeAdmission's hook is installed by configureApp (a Fastify hook, app-wide, acting on @ChargeRoute() routes).
  providers: [
    PaymentsService,
    PaymentStart,
    PaymentCharge,
    PaymentConfirm,
    PaymentFinish,
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
    // The credential of the webhooks' route, which auth's Authentication checks (configureApp hands it over).
    { provide: RequestSignature, useClass: CardNetworkSignature },
  ],
  exports: [PaymentsService, ChargeAdmission, OperationAttention],
})
export class PaymentsModule {}
