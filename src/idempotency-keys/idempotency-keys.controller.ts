import { Controller, Get, Param } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiParam, ApiTags } from '@nestjs/swagger';
import { AuthenticatedClient } from '../auth/authenticated-client';
import { CurrentClient } from '../auth/current-client.decorator';
import { containsCardNumber } from '../card-numbers/card-number';
import { ApiProblems } from '../http/openapi';
import { problems } from '../http/problem';
import { IdempotencyKeys } from 'safe-retries';
import { OperationAttention } from '../payments/attention/operation-attention';
import { KeyOutcomeResponse } from './dto/key-outcome.response';

@ApiTags('idempotency')
@ApiProblems(401)
@Controller('idempotency-keys')
export class IdempotencyKeysController {
  constructor(
    private readonly keys: IdempotencyKeys,
    private readonly attention: OperationAttention,
  ) {}

  @Get(':key')
  @ApiOperation({
    summary: 'The outcome of an operation by its Idempotency-Key, without running anything',
    description:
      "For a client that gave up retrying: did the operation happen? Scoped to your API client (another client's key is unknown here). Percent-encode the key in the path.",
  })
  @ApiParam({ name: 'key', description: 'The Idempotency-Key as sent (bare or as an RFC 8941 quoted string)' })
  @ApiOkResponse({ type: KeyOutcomeResponse })
  @ApiProblems(400)
  async get(@CurrentClient() client: AuthenticatedClient, @Param('key') key: string): Promise<KeyOutcomeResponse> {
    // No key holding a card number is ever stored (CardNumberKeyGuard): refused like one, never looked up or echoed.
    if (containsCardNumber(key)) throw problems.validationFailed([{ field: 'key', messages: ['key must not contain a card number'] }]);
    const found = await this.keys.outcome(client.id, key);
    switch (found.state) {
      case 'unknown':
        return { key: found.key, state: 'unknown' };
      case 'in_progress': {
        const retry_after = Math.ceil(found.retryAfterMs / 1000);
        const held = await this.attention.openForKey(client.id, found.key);
        if (!held) return { key: found.key, state: 'in_progress', retry_after };
        return { key: found.key, state: 'in_progress', retry_after, requires_attention: { attention_id: held.id, object: held.operation, id: held.record_id } };
      }
      case 'completed':
        return { key: found.key, state: 'completed', status: found.status, expires_at: found.expiresAt };
    }
  }
}
