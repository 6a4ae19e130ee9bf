/** The exact bytes of the idempotency module's 400 for a missing key, as every app sends them. */
export const MISSING_KEY_PROBLEM = JSON.stringify({
  type: '/docs/idempotency#idempotency_key_missing',
  title: 'Idempotency-Key Missing',
  status: 400,
  detail: 'This endpoint requires an Idempotency-Key header: one unique value per operation, reused on every retry.',
  code: 'idempotency_key_missing',
});
