/**
 * The faults a test queues on an account (the control API, control.ts): answers
 * lost after the effect, a 500 saved under the key instead of the effect, and
 * refusals before anything is done. One queue keeps the faults in the order
 * they were asked for; each request takes the first of its own kind.
 */
import { ErrorBody } from './api';

/** A fault that loses the answer of an executed request. */
export type LostAnswerFault = 'drop' | 'hang' | 'error';
/** `saved_error`: a 500 saved under the key instead of executing. */
export type SimulatorFault = LostAnswerFault | 'saved_error';

export const FAULTS: readonly SimulatorFault[] = ['drop', 'hang', 'error', 'saved_error'];
export const isLostAnswer = (fault: SimulatorFault): fault is LostAnswerFault => fault !== 'saved_error';

/** Takes the first queued fault of a kind out of an account's queue of faults. */
export function takeFault<F extends SimulatorFault>(faults: SimulatorFault[], kind: (f: SimulatorFault) => f is F): F | undefined {
  const index = faults.findIndex(kind);
  return index < 0 ? undefined : (faults.splice(index, 1)[0] as F);
}

export type RefusalStatus = 400 | 401 | 429;

/** A refusal of a request to /v1/* before anything is done; `skip`: requests let through first. */
export interface Refusal {
  status: RefusalStatus;
  skip: number;
  /** For a 400: the parameter it names. */
  param?: string;
}

export const REFUSALS: Readonly<Record<RefusalStatus, ErrorBody>> = {
  400: { type: 'invalid_request_error', code: 'parameter_invalid', message: 'Invalid request (refused by a simulator fault).' },
  401: { type: 'invalid_request_error', message: 'Invalid API Key provided (refused by a simulator fault).' },
  429: { type: 'invalid_request_error', code: 'rate_limit', message: 'Too many requests hit the API too quickly (refused by a simulator fault).' },
};

/** The refusal this request to /v1/* meets, taken off an account's queue of refusals; undefined lets it through. */
export function dueRefusal(refusals: Refusal[], path: string): { status: RefusalStatus; error: ErrorBody } | undefined {
  const refusal = refusals[0];
  if (!refusal || !path.startsWith('/v1/')) return undefined;
  if (refusal.skip > 0) {
    refusal.skip--;
    return undefined;
  }
  refusals.shift();
  const error = refusal.param ? { ...REFUSALS[400], param: refusal.param, message: `Invalid ${refusal.param} (refused by a simulator fault).` } : REFUSALS[refusal.status];
  return { status: refusal.status, error };
}
