import { Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { RequestWithClient } from '../auth/current-client.decorator';
import { SECRET_VERSION, ShownSecret, WebhookEndpointResponse } from './dto/webhook-endpoint.response';
import { WebhookEndpointsService } from './webhook-endpoints.service';

/** What the keys table keeps of an answer: the endpoint as answered, with the version of the secret it showed in place of the secret. */
type StoredAnswer = WebhookEndpointResponse & { secret_version?: number };

/**
 * The answers that show an endpoint's secret (registration, rotation) under
 * their Idempotency-Key (`@Idempotent({ replay: SecretAnswers })`): the secret
 * is never stored with them. The keys table keeps the endpoint as answered
 * and which secret it showed (its `secret_version`); a replay opens that
 * secret again from the endpoint's sealed row, where it is kept anyway, and
 * answers the same bytes as the first answer. Only while that secret is in
 * force: once a later rotation replaced it, the replay is 410
 * `webhook_secret_replaced` (it would show a secret about to stop signing);
 * once the endpoint is deleted, 404. An answer without a secret
 * (`expire_previous`) is stored and replayed as it is.
 */
@Injectable()
export class SecretAnswers {
  constructor(private readonly endpoints: WebhookEndpointsService) {}

  store(answer: WebhookEndpointResponse | ShownSecret): StoredAnswer {
    if (!('secret' in answer)) return answer;
    const { secret: _shown, [SECRET_VERSION]: secret_version, ...endpoint } = answer;
    return { ...endpoint, secret_version };
  }

  async replay(stored: StoredAnswer, req: FastifyRequest & Pick<RequestWithClient, 'client'>): Promise<WebhookEndpointResponse | ShownSecret> {
    const { secret_version, ...endpoint } = stored;
    if (secret_version === undefined) return endpoint;
    const client = req.client;
    if (!client) throw new Error('a webhook endpoint answer replayed to a request without a client');
    const secret = await this.endpoints.secretShownAgain(client.id, endpoint.id, secret_version);
    return { ...endpoint, secret, [SECRET_VERSION]: secret_version };
  }
}
