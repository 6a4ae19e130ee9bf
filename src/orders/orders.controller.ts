import { Body, Controller, Get, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AuthenticatedClient } from '../auth/authenticated-client';
import { CurrentClient } from '../auth/current-client.decorator';
import type { ResponseHeaders } from '../http/http';
import { ApiProblems } from '../http/openapi';
import { PageQueryDto } from '../http/pagination';
import { ParseIdPipe } from '../http/parse-id.pipe';
import { Idempotent } from 'safe-retries';
import { CreateOrderDto } from './dto/create-order.dto';
import { OrderPage, OrderResponse } from './dto/order.response';
import { OrdersService } from './orders.service';

@ApiTags('orders')
@ApiProblems(401)
@Controller('orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  // Its whole effect is one INSERT in this database: the key commits with it, once.
  @Post()
  @Idempotent({ commit: 'one' })
  @ApiOperation({ summary: 'Create an order (pending)' })
  @ApiCreatedResponse({ type: OrderResponse, headers: { Location: { description: '/orders/{id}', schema: { type: 'string' } } } })
  async create(
    @CurrentClient() client: AuthenticatedClient,
    @Body() dto: CreateOrderDto,
    @Res({ passthrough: true }) res: ResponseHeaders,
  ): Promise<OrderResponse> {
    const order = await this.orders.create(client.id, dto);
    res.header('Location', `/orders/${order.id}`);
    return order;
  }

  @Get()
  @ApiOperation({ summary: 'List orders, newest first (cursor pagination: limit, starting_after)' })
  @ApiOkResponse({ type: OrderPage })
  @ApiProblems(400)
  list(@CurrentClient() client: AuthenticatedClient, @Query() query: PageQueryDto) {
    return this.orders.list(client.id, query);
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get an order' })
  @ApiOkResponse({ type: OrderResponse })
  @ApiProblems(404)
  get(@CurrentClient() client: AuthenticatedClient, @Param('id', ParseIdPipe) id: string): Promise<OrderResponse> {
    return this.orders.get(client.id, id);
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @Idempotent()
  @ApiOperation({ summary: 'Cancel a pending order (422 order_not_cancelable otherwise)' })
  @ApiOkResponse({ type: OrderResponse })
  @ApiProblems(404)
  cancel(@CurrentClient() client: AuthenticatedClient, @Param('id', ParseIdPipe) id: string): Promise<OrderResponse> {
    return this.orders.cancel(client.id, id);
  }
}
