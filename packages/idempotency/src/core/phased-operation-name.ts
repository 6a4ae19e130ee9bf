/** Only for the compiler: no value carries it. */
declare const operationState: unique symbol;

/**
 * A phased operation's name, typed with the state its recovery points save. At
 * runtime it is the name itself, a string (stored with each recovery point,
 * in logs and spans); the state type exists for the compiler only, so that
 * the route, the method that resumes the operation and every takeover agree
 * on it without a cast.
 */
export type PhasedOperationName<S = unknown> = string & { readonly [operationState]: S };

/**
 * Declares a phased operation once, by its name and its state:
 *
 *   export const PaymentOperation = phasedOperation<PaymentState>('payments.create');
 *
 *   @Idempotent({ phased: PaymentOperation })     // the route that runs it
 *   @Resumes(PaymentOperation)                     // the method that resumes it:
 *   resume(op: PhasedOperation<PaymentState>) {}   //   its parameter type is checked
 *
 * The name is what the recovery job finds an abandoned operation by: keep it
 * stable across releases while operations under it may be in progress.
 */
export function phasedOperation<S>(name: string): PhasedOperationName<S> {
  if (name.trim() === '' || name.trim() !== name) {
    throw new TypeError(`phasedOperation(): a name is a non-empty string without surrounding spaces, not ${JSON.stringify(name)}`);
  }
  return name as PhasedOperationName<S>;
}
