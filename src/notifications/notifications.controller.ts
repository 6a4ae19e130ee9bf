import { Body, Controller, HttpCode, Param, Post } from '@nestjs/common';
import { ApiAcceptedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AuthenticatedClient } from '../auth/authenticated-client';
import { CurrentClient } from '../auth/current-client.decorator';
import { ApiProblems } from '../common/openapi';
import { ParseIdPipe } from '../common/parse-id.pipe';
import { Idempotent } from 'safe-retries';
import { OrderConfirmationResponse, SendOrderConfirmationDto } from './dto/order-confirmation.dto';
import { NotificationsService } from './notifications.service';

/**
 * The send is a side effect outside PostgreSQL, so the key lives in Redis: a
 * transaction would roll nothing back, and a retry costs one Redis round trip.
 * The price (packages/idempotency/docs/stores.md, "A Redis store"): a crash between the send and
 * the stored response, or a Redis failover, can let a retry send twice. Fine
 * for a confirmation message; never for a money movement. How many are sent is
 * capped per order and per client (ConfirmationLimits).
 */
@ApiTags('orders')
@ApiProblems(401)
@Controller('orders')
export class NotificationsController {
  constructor(private readonly notifications: NotificationsService) {}

  @Post(':id/confirmation')
  @HttpCode(202)
  @Idempotent({ store: 'redis' })
  @ApiOperation({ summary: "Send the order's confirmation to the buyer (once per Idempotency-Key; mounted when REDIS_URL is set)" })
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
