import { MiddlewareConsumer, Module, NestModule } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OrdersModule } from '../orders/orders.module';
import { CardNetworkModule } from './card-network/card-network.module';
import { ChargeAdmissionMiddleware } from './charge-admission.middleware';
import { PaymentEntity } from './payment.entity';
import { PaymentsController } from './payments.controller';
import { PaymentsRepository } from './payments.repository';
import { PaymentsService } from './payments.service';
import { RefundEntity } from './refund.entity';

@Module({
  imports: [TypeOrmModule.forFeature([PaymentEntity, RefundEntity]), OrdersModule, CardNetworkModule],
  controllers: [PaymentsController],
  providers: [PaymentsService, PaymentsRepository],
  exports: [PaymentsService],
})
export class PaymentsModule implements NestModule {
  /** The routes that reach the card network take turns (POSTs only; see the middleware). */
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(ChargeAdmissionMiddleware).forRoutes(PaymentsController);
  }
}
