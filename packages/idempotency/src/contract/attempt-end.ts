import { StoredResponse } from './idempotency.store';

/**
 * How an operation's attempt ended by its own doing: its response stored (on a
 * store without transactions it may stand unstored: `notStored`, the response
 * is answered all the same), the key given back with its phases undone, or the
 * operation held open (PhasedOperation.holdOff).
 */
export type OperationEnding = { kind: 'finished'; response: StoredResponse; notStored?: Error } | { kind: 'released' } | { kind: 'held' };

/** How an attempt ended: its own ending, or what settling it found or did. */
export type AttemptEnd =
  | OperationEnding
  /** Another attempt took the key over: nothing of this one committed, and nothing is ours to give up. */
  | { kind: 'lease_lost' }
  /**
   * The work failed, or stopped without an ending: the key was given up
   * (`given`: the store confirmed it), kept at its recovery point when one
   * committed (`kept`: the next attempt resumes it at once).
   */
  | { kind: 'gave_up'; kept: boolean; given: boolean };
