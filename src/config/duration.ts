// The duration format belongs to the idempotency module; config reads durations the same way.
export { Duration, formatDuration, parseDuration } from 'safe-retries';
