import { Body, Controller, HttpCode, Param, Post } from '@nestjs/common';
import { ApiAcceptedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AuthenticatedClient } from '../auth/authenticated-client';
import { CurrentClient } from '../auth/current-client.decorator';
import { ApiProblems } from '../http/openapi';
import { ParseIdPipe } from '../http/parse-id.pipe';
import { Idempotent } from 'safe-retries';
import { OrderConfirmationResponse, SendOrderConfirmationDto } from './dto/order-confirmation.dto';
import { NotificationsService } from './notifications.service';

/**
 * The send is a side effect outside PostgreSQL, so the route does not send:
 * it queues the confirmation in the outbox, in the transaction that stores its
 * key, and the relay sends it after the commit (packages/idempotency/docs/outbox.md).
 * A crash anywhere loses nothing and a retry queues nothing twice; the relay
 * may send twice (killed after a send), under one idempotency key. How many are
 * sent is capped per order and per client (ConfirmationLimits).
 */
@ApiTags('orders')
@ApiProblems(401)
@Controller('orders')
export class NotificationsController {
  constructor(private readonly notifications: NotificationsService) {}

  @Post(':id/confirmation')
  @HttpCode(202)
  @Idempotent()
  @ApiOperation({ summary: "Queue the order's confirmation to the buyer (once per Idempotency-Key; mounted when REDIS_URL is set)" })
  @ApiAcceptedResponse({ type: OrderConfirmationResponse })
  @ApiProblems(404, 429)
  confirm(
    @CurrentClient() client: AuthenticatedClient,
    @Param('id', ParseIdPipe) id: string,
    @Body() dto: SendOrderConfirmationDto,
  ): Promise<OrderConfirmationResponse> {
    return this.notifications.confirmOrder(client.id, id, dto);
  }
}
