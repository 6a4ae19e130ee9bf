/**
 * Claims sent together: every claim asked for during one turn of the event loop
 * goes to the database in ONE statement (see the store's claim statement), so
 * under load a request pays a share of a round trip, a parse and a commit
 * instead of a whole one. A claim alone waits only for the end of the current
 * turn (setImmediate).
 *
 * A statement holds each row id at most once, so that every row's answer is the
 * one a claim of its own would get. A second claim of an id already in the batch
 * (a duplicate arriving with its original) does not go to the database:
 *
 * - with the same fingerprint, it takes the answer the first one ends with, as
 *   a claim sent right after it would: the first claimed the key, so the
 *   duplicate is in progress for the new lease; otherwise it is told the same
 *   (completed, in progress, mismatch);
 * - with another fingerprint, it is sent in a later batch, once the first has
 *   its answer.
 */
export interface BatchedClaim<Request, Result> {
  id: string;
  /** Claims of the same id with equal `same` keys get the same answer. */
  same: Buffer;
  request: Request;
  resolve(result: Result): void;
  reject(error: unknown): void;
}

export interface ClaimBatchOptions<Request, Result> {
  /** Sends one statement for these claims (distinct ids) and answers each, in order. */
  send(claims: { id: string; request: Request }[]): Promise<Promise<Result>[]>;
  /** What a duplicate with the same fingerprint is told, given what its first ended with. */
  duplicateOf(first: Result, duplicate: Request): Result;
  /** The most claims in one statement. */
  maxSize: number;
}

export class ClaimBatch<Request, Result> {
  private pending: BatchedClaim<Request, Result>[] = [];
  private scheduled = false;

  constructor(private readonly options: ClaimBatchOptions<Request, Result>) {}

  claim(id: string, same: Buffer, request: Request): Promise<Result> {
    return new Promise<Result>((resolve, reject) => this.enqueue({ id, same, request, resolve, reject }));
  }

  private enqueue(claim: BatchedClaim<Request, Result>): void {
    this.pending.push(claim);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    const claims = this.pending;
    this.pending = [];
    const firsts = new Map<string, BatchedClaim<Request, Result>>();
    const followers = new Map<string, BatchedClaim<Request, Result>[]>();
    const batch: BatchedClaim<Request, Result>[] = [];
    for (const claim of claims) {
      const first = firsts.get(claim.id);
      if (!first) {
        firsts.set(claim.id, claim);
        batch.push(claim);
      } else {
        const list = followers.get(claim.id) ?? [];
        list.push(claim);
        followers.set(claim.id, list);
      }
    }
    for (let i = 0; i < batch.length; i += this.options.maxSize) {
      void this.send(batch.slice(i, i + this.options.maxSize), followers);
    }
  }

  private async send(batch: BatchedClaim<Request, Result>[], followers: Map<string, BatchedClaim<Request, Result>[]>): Promise<void> {
    let answers: Promise<Result>[];
    try {
      answers = await this.options.send(batch);
    } catch (error) {
      for (const claim of batch) {
        claim.reject(error);
        for (const follower of followers.get(claim.id) ?? []) follower.reject(error);
      }
      return;
    }
    batch.forEach((claim, i) => {
      answers[i].then(
        (result) => {
          claim.resolve(result);
          for (const follower of followers.get(claim.id) ?? []) {
            if (follower.same.equals(claim.same)) follower.resolve(this.options.duplicateOf(result, follower.request));
            else this.enqueue(follower);
          }
        },
        (error: unknown) => {
          claim.reject(error);
          for (const follower of followers.get(claim.id) ?? []) follower.reject(error);
        },
      );
    });
  }
}
