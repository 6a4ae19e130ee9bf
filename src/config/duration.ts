// The duration format belongs to the idempotency module; config reads durations the same way.
import { parseDuration } from 'safe-retries';

export { formatDuration, parseDuration } from 'safe-retries';
/** A duration as the module writes one: `500ms`, `30s`, `1m`, `24h`, `7d`. */
export type Duration = Parameters<typeof parseDuration>[0];
