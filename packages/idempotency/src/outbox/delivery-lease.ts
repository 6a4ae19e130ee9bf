/**
 * A relay's lease on one delivery, on this process's clock, from the moment
 * the publisher gets the message. `signal` aborts at the lease's end: the
 * publisher should stop (another relay may deliver the message now) and end
 * its attempt (record it, close what it opened). `expired` rejects one lease
 * later: the relay waits no longer for a publisher that did not answer, and
 * its slot frees. `end()` clears both once the publisher answered.
 */
export function deliveryLease(ms: number): { signal: AbortSignal; expired: Promise<never>; end(): void } {
  const lease = new AbortController();
  let expire!: (error: Error) => void;
  const expired = new Promise<never>((_, reject) => (expire = reject));
  let timer = setTimeout(() => {
    lease.abort(new Error('the relay lease on this message ended'));
    timer = setTimeout(() => expire(new Error(`the publisher did not answer within twice the relay's lease (${ms} ms)`)), ms);
  }, ms);
  return { signal: lease.signal, expired, end: () => clearTimeout(timer) };
}
