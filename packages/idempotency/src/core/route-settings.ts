import { IdempotentOptions } from '../config/module-options';
import { IdempotencyStore, OneCommitKeys } from '../contract/idempotency.store';
import { IdempotentReplay } from '../contract/idempotent-replay';

/** How a keyed call runs: its route: its options resolved against the module's, and its store. */
export interface RouteSettings {
  required: boolean;
  /** The operation name of a phased route (see PhasedOperation). */
  phased?: string;
  /** What spans and events call it: the phased name, else `Controller.handler`. */
  operation: string;
  /** How long a duplicate waits for the owner to finish (0: answer 409 at once). */
  waitMs: number;
  leaseMs: number;
  retentionMs: number;
  fingerprint?: IdempotentOptions['fingerprint'];
  /** The app's provider that keeps the answer's secret out of what is stored, and rebuilds replays (`replay`). */
  replay?: IdempotentReplay;
  /** Where a GraphQL mutation or a message handler finds its key (unset: the context's default). */
  key?: IdempotentOptions['key'];
  /** The scope of a message handler's keys (unset: `message:` and its pattern). */
  messageScope?: IdempotentOptions['messageScope'];
  /** Where its keys are kept; it has every optional part the route needs. */
  store: IdempotencyStore;
  /** Present when the route commits once (`commit: 'one'`): its key is claimed inside its transaction (OneCommitRun). */
  oneCommit?: OneCommitKeys;
}
