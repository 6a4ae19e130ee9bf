/**
 * What a request to /metrics gets: it may read them, or it is refused:
 * `unauthorized` (counted as a failed authentication of its address), or its
 * address is over its budget already (`retryAfterSeconds`, not counted again).
 */
export type MetricsVerdict = 'allowed' | 'unauthorized' | { retryAfterSeconds: number };

/**
 * Who may read /metrics, on the API port (auth's hook, before the route) and
 * on its own port (MetricsServer): one check for both. Metrics knows no
 * credentials: the app binds this contract when it imports MetricsModule
 * (auth's MetricsTokenAccess).
 */
export abstract class MetricsAccess {
  /** The verdict on a request from `address` with this Authorization header (a refusal is counted there). */
  abstract check(authorization: string | undefined, address: string): MetricsVerdict;
}
