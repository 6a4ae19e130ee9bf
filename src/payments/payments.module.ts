import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OrdersModule } from '../orders/orders.module';
import { CardNetworkModule } from './card-network/card-network.module';
import { ChargeAdmission } from './charge-admission';
import { PaymentEntity } from './payment.entity';
import { PaymentsController } from './payments.controller';
import { PaymentsRepository } from './payments.repository';
import { PaymentsService } from './payments.service';
import { RefundEntity } from './refund.entity';

@Module({
  imports: [TypeOrmModule.forFeature([PaymentEntity, RefundEntity]), OrdersModule, CardNetworkModule],
  controllers: [PaymentsController],
  // ChargeAdmission's hook is installed by configureApp (a Fastify hook, app-wide, acting on @ChargeRoute() routes).
  providers: [PaymentsService, PaymentsRepository, ChargeAdmission],
  exports: [PaymentsService, ChargeAdmission],
})
export class PaymentsModule {}
