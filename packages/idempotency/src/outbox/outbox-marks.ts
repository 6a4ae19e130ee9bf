import { Logger } from '@nestjs/common';
import { backoffMs } from './backoff';
import { OutboxMetrics } from './outbox-metrics';
import { OutboxStatements } from './outbox-statements';

/** A claimed message as its mark needs it: `attempts` is the claim's (the fence). */
export interface ClaimedMessage {
  id: string;
  topic: string;
  attempts: number;
}

/**
 * The relay's record of a delivery's end, fenced on the claim (its attempt
 * count), so a relay that outlived its lease marks nothing another relay
 * holds. `query` runs one autocommit statement in the relay's turn.
 */
export class OutboxMarks {
  /** Delivered messages waiting for their mark, and the marking in progress (see delivered). */
  private unmarked: { message: ClaimedMessage; settle: (error?: unknown) => void }[] = [];
  private marking?: Promise<void>;

  constructor(
    private readonly query: (sql: string, params: unknown[]) => Promise<unknown[]>,
    private readonly sql: OutboxStatements,
    private readonly horizonMs: number,
    private readonly metrics: OutboxMetrics,
    private readonly logger: Logger,
  ) {}

  /**
   * Marks a delivered message; resolves once its mark is written (rejects
   * with the statement's error). One mark statement at a time: the
   * deliveries that end while it runs are marked together by the next, so a
   * busy relay writes one mark for many deliveries and an idle one marks
   * each at once.
   */
  delivered(message: ClaimedMessage): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.unmarked.push({ message, settle: (error) => (error === undefined ? resolve() : reject(error)) });
      this.marking ??= this.mark();
    });
  }

  /**
   * Records a failed delivery: due again after the wait its error asks for
   * (`retryAfterMs`) or its backoff (backoff.ts), or a dead letter past the
   * horizon. Never rejects: a mark that fails is logged (unmarked, the
   * message is due again when its lease ends).
   */
  async failed(message: ClaimedMessage, error: unknown): Promise<void> {
    const reason = (error instanceof Error ? error.message : String(error)).slice(0, 1_000);
    try {
      // A wait past the horizon makes a dead letter whatever its length: capped there, any asked wait fits the statement's int8.
      const waitMs = Math.min(askedWaitMs(error) ?? backoffMs(message.attempts), this.horizonMs + 1);
      const marked = (await this.query(this.sql.failed, [message.id, message.attempts, waitMs, reason, this.horizonMs])) as { dead: boolean }[];
      const dead = marked[0]?.dead === true;
      this.metrics.deliveries.inc({ result: dead ? 'dead' : 'failed' });
      if (dead) this.logger.warn(`outbox message ${message.id} (${message.topic}) is a dead letter after ${message.attempts} attempts: ${reason}`);
    } catch (markError) {
      this.logger.error(`outbox message ${message.id}: recording a failed delivery failed: ${(markError as Error).message}`);
    }
  }

  /** Writes the waiting marks, a statement per batch, until none waits. */
  private async mark(): Promise<void> {
    while (this.unmarked.length > 0) {
      const batch = this.unmarked;
      this.unmarked = [];
      const error = await this.query(this.sql.delivered, [batch.map((m) => m.message.id), batch.map((m) => m.message.attempts)]).then(
        () => undefined,
        (failure: unknown) => failure ?? new Error('the mark failed'),
      );
      for (const m of batch) m.settle(error);
    }
    this.marking = undefined;
  }
}

/**
 * The wait a publisher's failure asks for (OutboxPublisher: `retryAfterMs`,
 * a finite number of ms, at least 0, rounded up); undefined when it asks none.
 */
function askedWaitMs(error: unknown): number | undefined {
  const asked = typeof error === 'object' && error !== null ? (error as { retryAfterMs?: unknown }).retryAfterMs : undefined;
  return typeof asked === 'number' && Number.isFinite(asked) && asked >= 0 ? Math.ceil(asked) : undefined;
}
