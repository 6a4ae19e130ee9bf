import { Args, ID, Mutation, Query, Resolver } from '@nestjs/graphql';
import { Idempotent } from 'safe-retries';
import { AuthenticatedClient } from '../auth/authenticated-client';
import { CurrentClient } from '../auth/current-client.decorator';
import { ParseIdPipe } from '../http/parse-id.pipe';
import { CreateOrderDto } from './dto/create-order.dto';
import { OrderResponse } from './dto/order.response';
import { OrdersService } from './orders.service';

/**
 * Orders over GraphQL (`POST /graphql`), with the same API key, rate limit,
 * validation and service as REST. `createOrder` is exactly-once per
 * (client, Idempotency-Key header), like `POST /orders`: a retry gets the
 * stored order back (`Idempotent-Replayed: true` on the HTTP answer), a
 * concurrent duplicate the error IDEMPOTENCY_KEY_IN_USE, the key reused with
 * another input IDEMPOTENCY_KEY_REUSED.
 */
@Resolver(() => OrderResponse)
export class OrdersResolver {
  constructor(private readonly orders: OrdersService) {}

  @Mutation(() => OrderResponse, { description: 'Create an order (pending); send an Idempotency-Key header' })
  // As POST /orders: its whole effect is one INSERT in this database, so the key commits with it, once.
  @Idempotent({ commit: 'one' })
  createOrder(@CurrentClient() client: AuthenticatedClient, @Args('input') input: CreateOrderDto): Promise<OrderResponse> {
    return this.orders.create(client.id, input);
  }

  @Query(() => OrderResponse, { description: 'An order of the calling client' })
  order(@CurrentClient() client: AuthenticatedClient, @Args('id', { type: () => ID }, ParseIdPipe) id: string): Promise<OrderResponse> {
    return this.orders.get(client.id, id);
  }
}
