import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventsModule } from '../events/events.module';
import { OrderEntity } from './order.entity';
import { OrdersController } from './orders.controller';
import { OrdersRepository } from './orders.repository';
import { OrdersResolver } from './orders.resolver';
import { OrdersService } from './orders.service';

@Module({
  imports: [TypeOrmModule.forFeature([OrderEntity]), EventsModule],
  controllers: [OrdersController],
  providers: [OrdersService, OrdersRepository, OrdersResolver],
  exports: [OrdersService],
})
export class OrdersModule {}
