/**
 * `safe-retries/nats`: an outbox publisher for NATS JetStream (the outbox's
 * docs, "A publisher for NATS JetStream"). nats is loaded only when the
 * publisher connects from server URLs.
 */
export { natsOutboxPublisher } from './nats-outbox-publisher';
export type { NatsOutboxConnection, NatsOutboxJetStream, NatsOutboxPublisherOptions } from './nats-outbox-publisher';
