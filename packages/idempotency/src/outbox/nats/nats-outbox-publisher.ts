import type { OutboxMessage, OutboxPublisher } from '../../contract/outbox-message';

/**
 * What the publisher uses of a `nats` connection (a `NatsConnection` is one).
 * Structural, so that the package's types do not need nats installed.
 */
export interface NatsOutboxConnection {
  jetstream(): NatsOutboxJetStream;
}

/** What the publisher uses of a JetStream client. */
export interface NatsOutboxJetStream {
  publish(subject: string, data: Uint8Array, options: { msgID: string }): Promise<unknown>;
}

/** A connection the publisher opened, and closes. */
interface OwnedConnection extends NatsOutboxConnection {
  close(): Promise<void>;
  closed(): Promise<unknown>;
}

/** Where the publisher sends: server URLs (it owns the connection) or the app's own connection. */
export interface NatsOutboxPublisherOptions {
  /**
   * `nats://[user:password@]host:4222`, one or several (a cluster): the publisher
   * connects at its first message, reconnects for as long as it runs, and closes
   * at the app's shutdown.
   */
  servers?: string | string[];
  /** A connection of the app's (`await connect(...)` of `nats`); it stays the app's: never closed here. */
  connection?: NatsOutboxConnection;
  /** The subject a message is published on. Default: its topic (`order.confirmed`). */
  subject?: (message: OutboxMessage) => string;
}

const encoder = new TextEncoder();

/**
 * An outbox publisher for NATS JetStream: each message's payload, as JSON, on
 * its subject, with `Nats-Msg-Id` set to the message's id. A stream capturing
 * the subject stores it once: a redelivery of the same id within the stream's
 * `duplicate_window` (2 minutes by default) is acknowledged as a duplicate and
 * dropped. The publish resolves on the stream's acknowledgement; no stream
 * for the subject, no server, or no answer within 5 s (nats' JetStream
 * timeout) is a failure, which the relay retries. The relay's abort signal
 * ends the wait (the message may still be stored; its id makes the next
 * attempt a duplicate). nats is loaded only when a publisher connects from
 * `servers`.
 */
export function natsOutboxPublisher(options: NatsOutboxPublisherOptions): OutboxPublisher {
  const { servers, connection } = options;
  if ((servers === undefined) === (connection === undefined)) throw new TypeError('natsOutboxPublisher: give servers or connection (one of them)');
  const subject = options.subject ?? ((message: OutboxMessage) => message.topic);
  let appJetStream: NatsOutboxJetStream | undefined;
  let opened: Promise<{ nc: OwnedConnection; js: NatsOutboxJetStream }> | undefined;
  let closing = false;

  const jetstream = async (signal: AbortSignal): Promise<NatsOutboxJetStream> => {
    if (connection) return (appJetStream ??= connection.jetstream());
    if (closing) throw new Error('natsOutboxPublisher: closed');
    if (!opened) {
      const attempt = connect(servers!).then((nc) => ({ nc, js: nc.jetstream() }));
      opened = attempt;
      // A failed connection, or one closed for good (say, refused credentials), is opened again at the next message.
      const forget = () => {
        if (opened === attempt) opened = undefined;
      };
      attempt.then(({ nc }) => nc.closed().then(forget), forget);
    }
    return (await untilAborted(opened, signal)).js;
  };

  const publish = async (message: OutboxMessage, signal: AbortSignal): Promise<void> => {
    signal.throwIfAborted();
    const data = encoder.encode(JSON.stringify(message.payload));
    const js = await jetstream(signal);
    await untilAborted(js.publish(subject(message), data, { msgID: message.id }), signal);
  };

  return Object.assign(publish, {
    async close(): Promise<void> {
      closing = true;
      const owned = await opened?.catch(() => undefined);
      await owned?.nc.close();
    },
  });
}

/** Connects with nats (loaded here: an app without this publisher need not install it). */
async function connect(servers: string | string[]): Promise<OwnedConnection> {
  const nats = await import('nats');
  try {
    // Reconnects without end: the outbox's retries, not the client's, decide when a message is given up.
    return await nats.connect({ servers, name: 'safe-retries-outbox', maxReconnectAttempts: -1 });
  } catch (error) {
    // Never the URLs: they may carry a password.
    throw new Error(`natsOutboxPublisher: cannot connect to NATS: ${(error as Error).message}`, { cause: error });
  }
}

/** `work`, or the signal's reason as soon as it aborts (the work itself goes on, unobserved). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason as Error);
    if (signal.aborted) abort();
    else signal.addEventListener('abort', abort, { once: true });
    // Always observed, so that its late failure is no unhandled rejection.
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}
