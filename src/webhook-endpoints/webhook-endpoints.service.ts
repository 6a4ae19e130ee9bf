import { Inject, Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { randomUUID } from 'node:crypto';
import { isIP } from 'node:net';
import { ProblemException, problems } from '../http/problem';
import type { AppConfig } from '../config/config';
import { APP_CONFIG } from '../config/config.module';
import { ALL_EVENTS } from '../event-types/event-types';
import { RefusedAddressError, isPublicAddress, publicAddresses } from '../addresses/public-address';
import { HostResolver } from '../addresses/host-resolver';
import { CreateWebhookEndpointDto } from './dto/create-webhook-endpoint.dto';
import { SECRET_VERSION, ShownSecret, WebhookEndpointResponse } from './dto/webhook-endpoint.response';
import { EndpointSecrets } from './endpoint-secrets';
import { AdmissionRow, EndpointFailure, WebhookEndpointRow, WebhookEndpointsRepository } from './webhook-endpoints.repository';
import { DISABLE_AFTER, FAILURES_BEFORE_PAUSE, PAUSE_S, PROBE_LEASE_S } from './endpoint-pacing';

/** The endpoint as answered with its new secret, and which secret that is (SECRET_VERSION, never sent). */
function withSecret(row: WebhookEndpointRow, secret: string): ShownSecret {
  return { ...toResponse(row), secret, [SECRET_VERSION]: row.secret_version };
}

function toResponse(row: WebhookEndpointRow): WebhookEndpointResponse {
  return {
    id: row.id,
    url: row.url,
    event_types: row.event_types,
    created_at: row.created_at.toISOString(),
    status: row.disabled_at ? 'disabled' : 'enabled',
    disabled_reason: row.disabled_reason,
    failing_since: row.failing_since?.toISOString() ?? null,
  };
}

/**
 * The most endpoints a client may have (Stripe's limit): each event is
 * queued once per subscribed endpoint in the transaction of the change it
 * announces (in one statement: EventsService.record), so this bounds what a
 * payment or an order writes.
 */
export const MAX_ENDPOINTS_PER_CLIENT = 16;

/** Where an endpoint's deliveries go, with its secrets opened (for the delivery publisher only). */
export interface DeliveryTarget {
  url: string;
  /** The secrets that sign each delivery: the current one, then the one it replaced while the rotation's overlap lasts. */
  secrets: string[];
}

/**
 * Whether a delivery may go now: its target, or why it is held (the endpoint
 * disabled or paused) and, paused, the ms until its next probe may go.
 */
export type Admission =
  | { target: DeliveryTarget; held?: undefined }
  | { target?: undefined; held: 'disabled'; probeInMs?: undefined }
  | { target?: undefined; held: 'paused'; probeInMs: number };

export type { EndpointFailure } from './webhook-endpoints.repository';

/**
 * A client's webhook endpoints. The secret is generated here, answered once
 * (on create and on rotate, and to their retries under the same key:
 * SecretAnswers) and stored sealed (EndpointSecrets); it is never listed and
 * never logged, nor is the previous one a rotation keeps signing
 * for ROTATION_OVERLAP. A URL must be https in production (http is allowed
 * outside it, for a local receiver), carry no credentials, and not be an IP
 * literal of a private, loopback or link-local address; in production a host
 * name must resolve to public addresses only, when it is registered and again
 * at each delivery (WebhookPublisher: what it resolves to may change).
 */
@Injectable()
export class WebhookEndpointsService {
  private readonly production: boolean;

  constructor(
    private readonly endpoints: WebhookEndpointsRepository,
    private readonly secrets: EndpointSecrets,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly resolver: HostResolver,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.production = config.production;
  }

  async create(clientId: string, dto: CreateWebhookEndpointDto): Promise<ShownSecret> {
    const url = this.validUrl(dto.url);
    if (this.production) await resolvesPublic(new URL(url).hostname.replace(/^\[(.*)\]$/, '$1'), this.resolver);
    const types = dto.event_types.includes(ALL_EVENTS) ? [ALL_EVENTS] : dto.event_types;
    const id = randomUUID();
    const secret = EndpointSecrets.generate();
    const sealed = this.secrets.seal(id, secret);
    // The client's endpoints are counted with its row locked: concurrent registrations take turns, so none passes the limit.
    const row = await this.txHost.withTransaction(async () => {
      if ((await this.endpoints.countLocked(clientId)) >= MAX_ENDPOINTS_PER_CLIENT) throw endpointLimit();
      return this.endpoints.insert(clientId, id, url, types, sealed);
    });
    return withSecret(row, secret);
  }

  async list(clientId: string): Promise<{ object: 'list'; data: WebhookEndpointResponse[] }> {
    return { object: 'list', data: (await this.endpoints.list(clientId)).map(toResponse) };
  }

  async delete(clientId: string, id: string): Promise<void> {
    if (!(await this.endpoints.delete(clientId, id))) throw notFound(id);
  }

  /**
   * A new secret: deliveries from now on are signed with it and, for
   * ROTATION_OVERLAP, with the one it replaces too. With `expirePrevious`, no
   * new secret: the overlap ends, only the current secret signs from now on.
   */
  async rotate(clientId: string, id: string, expirePrevious = false): Promise<WebhookEndpointResponse | ShownSecret> {
    if (expirePrevious) {
      const expired = await this.endpoints.expirePrevious(clientId, id);
      if (!expired) throw notFound(id);
      return toResponse(expired);
    }
    const secret = EndpointSecrets.generate();
    const row = await this.endpoints.replaceSecret(clientId, id, this.secrets.seal(id, secret));
    if (!row) throw notFound(id);
    return withSecret(row, secret);
  }

  /**
   * The secret of version `version` of the endpoint, opened from its sealed
   * row, for the replay of the answer that showed it (SecretAnswers): only
   * while it is still the one in force. Replaced by a later rotation: 410
   * `webhook_secret_replaced`; the endpoint deleted: 404.
   */
  async secretShownAgain(clientId: string, id: string, version: number): Promise<string> {
    const row = await this.endpoints.find(clientId, id);
    if (!row) throw notFound(id);
    if (row.secret_version !== version) throw secretReplaced(id);
    return this.secrets.open(id, row.secret);
  }

  async exists(clientId: string, id: string): Promise<boolean> {
    return (await this.endpoints.find(clientId, id)) !== undefined;
  }

  /** Enabled again (200 whatever it was): its held deliveries go at their next turn, new events are queued for it. */
  async enable(clientId: string, id: string): Promise<WebhookEndpointResponse> {
    const row = await this.endpoints.enable(clientId, id);
    if (!row) throw notFound(id);
    return toResponse(row);
  }

  /**
   * Whether a delivery to the endpoint may go now (its URL and secrets
   * opened), or is held: disabled, or paused (another delivery is its probe,
   * or the probe's time has not come); from the endpoint's `admission` row
   * (admissionCtes, read with PROBE_LEASE_S and ROTATION_OVERLAP).
   */
  admission(id: string, row: AdmissionRow): Admission {
    if (!row.admitted) return row.disabled ? { held: 'disabled' } : { held: 'paused', probeInMs: row.probe_in_ms ?? PROBE_LEASE_S * 1000 };
    const secrets = [row.secret, ...(row.previous_secret === null ? [] : [row.previous_secret])].map((s) => this.secrets.open(id, s));
    return { target: { url: row.url, secrets } };
  }

  /** A delivery failed: counted toward the pause and the disabling (webhook-schedule.ts); answers the endpoint when this disabled it. */
  async failed(clientId: string, id: string, failure: EndpointFailure): Promise<WebhookEndpointResponse | undefined> {
    const pacing = { failuresBeforePause: FAILURES_BEFORE_PAUSE, pauseFirstS: PAUSE_S.first, pauseMaxS: PAUSE_S.max, disableAfter: DISABLE_AFTER };
    const row = await this.endpoints.failed(clientId, id, failure, pacing);
    return row && toResponse(row);
  }

  private validUrl(given: string): string {
    let url: URL;
    try {
      url = new URL(given);
    } catch {
      throw invalidUrl('url must be an absolute URL');
    }
    const schemes = this.production ? ['https:'] : ['https:', 'http:'];
    if (!schemes.includes(url.protocol)) throw invalidUrl(this.production ? 'url must use https' : 'url must use https or http');
    if (url.username || url.password) throw invalidUrl('url must not carry credentials');
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (this.production && isIP(host) && !isPublicAddress(host)) throw invalidUrl('url must not point at a private, loopback or link-local address');
    return url.toString();
  }
}

/** How long registration waits for the host's addresses. */
const RESOLVE_TIMEOUT_MS = 5_000;

/**
 * A host that resolves to a private address (or to none) is refused now; one
 * whose resolution fails otherwise (a resolver timing out) is checked at
 * each delivery as any host is.
 */
async function resolvesPublic(host: string, resolver: HostResolver): Promise<void> {
  try {
    await publicAddresses(host, resolver, AbortSignal.timeout(RESOLVE_TIMEOUT_MS));
  } catch (error) {
    if (error instanceof RefusedAddressError) throw invalidUrl(`url must not point at a private, loopback or link-local address: ${error.message}`);
    const code = (error as { code?: unknown }).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') throw invalidUrl(`url's host ${host} does not resolve`);
  }
}

function endpointLimit(): ProblemException {
  return new ProblemException({
    status: 422,
    code: 'webhook_endpoint_limit',
    title: 'Webhook Endpoint Limit',
    detail: `A client has at most ${MAX_ENDPOINTS_PER_CLIENT} webhook endpoints; delete one first (DELETE /webhook-endpoints/{id}).`,
  });
}

function secretReplaced(id: string): ProblemException {
  return new ProblemException({
    status: 410,
    code: 'webhook_secret_replaced',
    title: 'Webhook Secret Replaced',
    detail: `A later rotation replaced the secret this request made for webhook endpoint ${id}, so it is not shown again: the secret in force is the one that rotation answered (POST /webhook-endpoints/{id}/rotate makes a new one).`,
  });
}

function invalidUrl(message: string) {
  return problems.validationFailed([{ field: 'url', messages: [message] }]);
}

function notFound(id: string) {
  return problems.notFound(`No webhook endpoint ${id}.`);
}
