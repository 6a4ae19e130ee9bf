/**
 * Who may read /metrics, on the API port (MetricsController) and on its own
 * port (MetricsServer). Metrics knows no credentials: the app binds this
 * contract when it imports MetricsModule (auth's MetricsTokenAccess: the
 * metrics token, a failure counted against the address).
 */
export abstract class MetricsAccess {
  /** Whether a request with this Authorization header may read /metrics. Counts nothing. */
  abstract allows(authorization: string | undefined): boolean;

  /**
   * A request from `address` that may not: counted as a failed
   * authentication (then answered 401), unless the address is over its budget
   * already (then 429 after `retryAfterSeconds`, not counted again).
   */
  abstract refuse(address: string): { retryAfterSeconds: number } | undefined;
}
