/** `safe-retries/outbox`: messages committed with the key's transaction, sent after it (docs/outbox.md). */
export { Outbox, OutboxOutsideTransactionError } from './outbox';
export type { OutboxEntry } from './outbox';
export type { DeadLetter, OutboxMessage, OutboxPublisher } from '../contract/outbox-message';
