import type { OutboxPublisher } from 'safe-retries/outbox';
import { Notification, Notifier } from './notifier';

/** The outbox topic of an order confirmation; its payload is the Notification. */
export const ORDER_CONFIRMATION_TOPIC = 'order.confirmation';

/**
 * The outbox's publisher: hands each confirmation to the Notifier with the
 * message's id as its idempotency key, so a relay that sends again (killed
 * after the send, before the mark) sends nothing twice at a provider that
 * honours the key. A message of another topic fails (and, past the horizon,
 * waits as a dead letter).
 */
export function confirmationPublisher(notifier: Notifier): OutboxPublisher {
  return async (message) => {
    if (message.topic !== ORDER_CONFIRMATION_TOPIC) throw new Error(`no publisher for the outbox topic ${message.topic}`);
    await notifier.send(message.payload as Notification, message.id);
  };
}
