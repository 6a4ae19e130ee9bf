import { Logger } from '@nestjs/common';
import { LeaseLostError } from '../contract/idempotency.errors';
import { IdempotencyStore, Ownership } from '../contract/idempotency.store';

/**
 * Keeps an owner's lease alive for as long as its work runs, so that the lease
 * covers the whole work however long it takes (a slow handler, a card network
 * call and its resends), and a crashed owner's key is still taken over one lease
 * after its last renewal.
 *
 * - Every third of the lease, a renewal (the store's fenced compare-and-set)
 *   moves the lease to a full lease from now and gives the owner a new token.
 * - The owner's token is what every fenced statement matches on, so a fenced
 *   statement never runs while a renewal is in flight, and no renewal starts
 *   while one runs (`fenced`; a recovery point's, until its transaction
 *   ends). A renewal that waits for the row lock of a fenced statement's
 *   transaction simply runs after its commit. The last
 *   statement (`end`: completion, release, yield) stops the renewals first.
 * - The lease is believed held only while the last renewal said so and a lease
 *   has not passed since that renewal was sent (on this process's monotonic
 *   clock: never longer than the store's own). Before a call to the outside
 *   world (PhasedOperation.call), `confirm` renews at once when less than a
 *   third of the lease is known to be left (a busy event loop can delay the
 *   timer), and throws LeaseLostError when the key is no longer ours or the
 *   store cannot say: an owner that lost its lease stops before its next call.
 */
export class LeaseKeeper {
  private readonly logger = new Logger('Idempotency');
  private readonly timer: NodeJS.Timeout;
  private renewing?: Promise<void>;
  private fencing = 0;
  private lost = false;
  private stopped = false;
  /** performance.now() after which the lease may have ended. */
  private heldUntil: number;

  constructor(
    /** The owner's token changes with each renewal: every fenced statement reads it from here. */
    readonly owner: Ownership,
    private readonly store: Pick<IdempotencyStore, 'renew'>,
    private readonly leaseMs: number,
    /** When the claim (or takeover) that set the lease was sent. */
    claimedAt = performance.now(),
  ) {
    this.heldUntil = claimedAt + leaseMs;
    this.timer = setInterval(() => void this.renew(), Math.max(1, Math.floor(leaseMs / 3)));
    this.timer.unref();
  }

  /** Whether the lease is still this owner's, as far as it can know. */
  get held(): boolean {
    return !this.lost && performance.now() < this.heldUntil;
  }

  /**
   * Resolves while the lease is this owner's for at least a third of it more;
   * renews first when less is known to be left. LeaseLostError otherwise.
   */
  async confirm(): Promise<void> {
    if (this.lost) throw new LeaseLostError();
    if (performance.now() < this.heldUntil - this.leaseMs / 3) return;
    await this.renewing;
    if (!this.stopped && !this.lost && performance.now() >= this.heldUntil - this.leaseMs / 3) await this.renew();
    if (!this.held) throw new LeaseLostError();
  }

  /**
   * Runs a statement fenced on the owner's token, never beside a renewal. With
   * `until`, no renewal starts before it settles either: a statement sent with
   * its transaction's COMMIT (a pipelined client) resolves before the server
   * has run it, and a renewal run first would change the token it matches on.
   */
  async fenced<T>(statement: (owner: Ownership) => Promise<T>, until?: Promise<unknown>): Promise<T> {
    this.fencing++;
    const done = () => void this.fencing--;
    try {
      await this.renewing;
      return await statement(this.owner);
    } finally {
      if (until) void until.then(done, done);
      else done();
    }
  }

  /**
   * The owner's last fenced statement (completion, release, yield): renewals
   * stop first, so none can extend a lease that this statement gives up.
   */
  async end<T>(statement: (owner: Ownership) => Promise<T>): Promise<T> {
    await this.stop();
    return statement(this.owner);
  }

  /** No more renewals; resolves once a renewal in flight has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.renewing;
  }

  /** One renewal, unless one is in flight (its promise then) or a fenced statement runs. */
  private renew(): Promise<void> {
    if (this.renewing) return this.renewing;
    if (this.fencing > 0 || this.stopped || this.lost) return Promise.resolve();
    const sentAt = performance.now();
    this.renewing = this.store
      .renew(this.owner, this.leaseMs)
      .then(
        (token) => {
          if (token === null) {
            this.lost = true;
            clearInterval(this.timer);
            return;
          }
          this.owner.token = token;
          this.heldUntil = sentAt + this.leaseMs;
        },
        (error: unknown) => {
          // Tried again at the next tick; the lease is believed only until heldUntil.
          this.logger.warn(`could not renew a lease: ${(error as Error).message}`);
        },
      )
      .finally(() => {
        this.renewing = undefined;
      });
    return this.renewing;
  }
}
