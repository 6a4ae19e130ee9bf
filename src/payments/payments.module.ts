import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OrdersModule } from '../orders/orders.module';
import { CardNetwork } from './card-network/card-network';
import { SimulatedCardNetwork } from './card-network/simulated-card-network';
import { PaymentEntity } from './payment.entity';
import { PaymentsController } from './payments.controller';
import { PaymentsRepository } from './payments.repository';
import { PaymentsService } from './payments.service';
import { RefundEntity } from './refund.entity';

@Module({
  imports: [TypeOrmModule.forFeature([PaymentEntity, RefundEntity]), OrdersModule],
  controllers: [PaymentsController],
  providers: [PaymentsService, PaymentsRepository, { provide: CardNetwork, useClass: SimulatedCardNetwork }],
  exports: [PaymentsService],
})
export class PaymentsModule {}
