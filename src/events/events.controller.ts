import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiAcceptedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AuthenticatedClient } from '../auth/authenticated-client';
import { CurrentClient } from '../auth/current-client.decorator';
import { ApiProblems } from '../http/openapi';
import { RedeliveryRoute } from '../http/route-access';
import { DeliveryAttemptList, EventPage, EventQueryDto, EventResponse, RedeliverDto, RedeliverResponse } from './dto/event.response';
import { EventsService } from './events.service';
import { EVENTS_RETENTION_DAYS } from './retention/events-purge.job';

const KEPT =
  `An event is kept ${EVENTS_RETENTION_DAYS} days from its creation, and longer while one of its delivery attempts is kept or a delivery of it is ` +
  `waiting or a dead letter (a dead letter is kept ${EVENTS_RETENTION_DAYS} days from its death); then it is deleted: no longer listed, found or redelivered.`;

@ApiTags('events')
@ApiProblems(401)
@Controller('events')
export class EventsController {
  constructor(private readonly events: EventsService) {}

  @Get()
  @ApiOperation({ summary: 'List events, newest first (cursor pagination: limit, starting_after)', description: KEPT })
  @ApiOkResponse({ type: EventPage })
  @ApiProblems(400)
  list(@CurrentClient() client: AuthenticatedClient, @Query() query: EventQueryDto): Promise<EventPage> {
    return this.events.list(client.id, query);
  }

  @Get(':id')
  @ApiOperation({ summary: 'Get an event', description: KEPT })
  @ApiOkResponse({ type: EventResponse })
  @ApiProblems(404)
  get(@CurrentClient() client: AuthenticatedClient, @Param('id') id: string): Promise<EventResponse> {
    return this.events.get(client.id, id);
  }

  @Get(':id/attempts')
  @ApiOperation({
    summary: "The event's delivery attempts to your endpoints, newest first",
    description: `Each attempt is kept ${EVENTS_RETENTION_DAYS} days from its end (its finish, or the start of one cut short).`,
  })
  @ApiOkResponse({ type: DeliveryAttemptList })
  @ApiProblems(404)
  attempts(@CurrentClient() client: AuthenticatedClient, @Param('id') id: string): Promise<DeliveryAttemptList> {
    return this.events.attempts(client.id, id);
  }

  @Post(':id/redeliver')
  @RedeliveryRoute()
  @HttpCode(202)
  @ApiOperation({ summary: 'Deliver an event again (to one endpoint, or to every endpoint subscribed to its type)' })
  @ApiAcceptedResponse({ type: RedeliverResponse })
  @ApiProblems(400, 404, 429)
  async redeliver(@CurrentClient() client: AuthenticatedClient, @Param('id') id: string, @Body() dto: RedeliverDto): Promise<RedeliverResponse> {
    return { endpoint_ids: await this.events.redeliver(client.id, id, dto.endpoint_id) };
  }
}
