import { formatDuration } from '../config/duration';
import { ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { IdempotencyErrorCode } from '../contract/idempotency.errors';
import { X_IDEMPOTENCY } from './describe-idempotent-routes';

/**
 * The published idempotency policy, rendered from the running configuration so
 * what clients read is what the server does: the OpenAPI document's
 * info.description, each idempotent operation, and the page at `policyUrl`.
 */
export function policySummary(o: ResolvedIdempotencyOptions): string {
  const lease = formatDuration(o.leaseMs);
  const retention = formatDuration(o.retentionMs);
  return [
    `**Idempotency.** Every state-changing endpoint accepts an \`Idempotency-Key\` header (1-255 printable ASCII characters, bare or as an RFC 8941 quoted string; both forms are the same key). Keys are scoped to your API client. A key's stored response is kept for **${retention}** from the moment the operation ended (its response was stored; database clock); after that the key is new again. An operation that has not ended (a payment whose outcome at the card network is still unknown) is never forgotten: a retry with its key at any age resumes it.`,
    `The first request with a key runs once; its status, body, Content-Type and Location are stored in the same database transaction as its effect. Every retry with the same key and the same request (method, path, query and JSON body, key order ignored) gets the stored response back, byte for byte, with \`Idempotent-Replayed: true\`, and runs nothing.`,
    `A business outcome (a declined card answered 402, a business rule answered 422) is stored and replayed like a success. Any other failure (validation error 400, server error 5xx, database unavailable 503) rolls back and releases the key: retry with the same key. Routes that reach an outside system (a card network) run in phases: an unknown outcome there (503 with Retry-After) keeps the key, and your next retry resumes the same operation at once; it never runs twice.`,
    `Status codes: 400 \`${IdempotencyErrorCode.KeyMissing}\` / \`${IdempotencyErrorCode.KeyInvalid}\`; 409 \`${IdempotencyErrorCode.InProgress}\` while the first request runs (honour Retry-After) or \`${IdempotencyErrorCode.LeaseLost}\` when an attempt stalled past its ${lease} lease (a working attempt renews it) and another took over; 422 \`${IdempotencyErrorCode.KeyReused}\` when the key comes with a different request.`,
    `Retry network errors, timeouts, 409, 429, 502, 503 and 504 with the same key and body, with exponential backoff and jitter; never retry 400, 401, 402, 404 or 422 unchanged.${o.policyUrl === undefined ? '' : ` Full policy: ${o.policyUrl}`}`,
  ].join('\n\n');
}

export function policyMarkdown(o: ResolvedIdempotencyOptions): string {
  return `# Idempotency policy\n\n${policySummary(o)}\n\nA claim is honoured for ${formatDuration(o.leaseMs)} (the lease), renewed every third of it while the request works; a retry after it has run out takes over an abandoned request (for example after a crash), and the stalled original can then never commit. Operations marked \`commit: one\` in \`x-idempotency\` run with their key in one database transaction instead: they have no lease to wait out (a crashed attempt frees its key at once), a retry while one runs gets 409 (with a different body too, until the first has ended: then 422), and the lease is the longest that transaction may run (the database ends it after that, and nothing of it commits).\n`;
}

type OpenApiDoc = {
  info: { description?: string };
  paths: Record<string, Record<string, OpenApiOperation>>;
  components?: { schemas?: Record<string, unknown> };
};
type OpenApiOperation = {
  description?: string;
  parameters?: { name: string; in: string; description?: string }[];
  responses?: Record<string, { headers?: Record<string, unknown> }>;
  [X_IDEMPOTENCY]?: { lease: number | string | null; retention: number | string | null; required: boolean; commit?: 'one' };
};

/**
 * Fills the effective lease and retention into every @Idempotent() operation
 * of `document` (described by describeIdempotentRoutes before it was created)
 * and states the policy in its `info.description`.
 */
export function applyIdempotencyPolicy<T extends object>(document: T, o: ResolvedIdempotencyOptions): T {
  const doc = document as unknown as OpenApiDoc;
  doc.info.description = [doc.info.description, policySummary(o)].filter(Boolean).join('\n\n');
  doc.components ??= {};
  doc.components.schemas ??= {};
  doc.components.schemas.Problem ??= {
    type: 'object',
    description: 'RFC 9457 problem details (application/problem+json)',
    required: ['type', 'title', 'status', 'detail', 'code'],
    properties: {
      type: { type: 'string', example: o.policyUrl === undefined ? 'about:blank' : `${o.policyUrl}#${IdempotencyErrorCode.InProgress}` },
      title: { type: 'string', example: 'Request In Progress' },
      status: { type: 'integer', example: 409 },
      detail: { type: 'string' },
      code: { type: 'string', example: IdempotencyErrorCode.InProgress },
      errors: {
        type: 'array',
        description: 'validation_failed only: the failing fields',
        items: { type: 'object', properties: { field: { type: 'string' }, messages: { type: 'array', items: { type: 'string' } } } },
      },
    },
  };
  for (const operations of Object.values(doc.paths)) {
    for (const op of Object.values(operations)) {
      const ext = op[X_IDEMPOTENCY];
      if (!ext) continue;
      const leaseMs = typeof ext.lease === 'number' ? ext.lease : o.leaseMs;
      const retentionMs = typeof ext.retention === 'number' ? ext.retention : o.retentionMs;
      ext.lease = formatDuration(leaseMs);
      ext.retention = formatDuration(retentionMs);
      const header = op.parameters?.find((p) => p.in === 'header' && p.name === 'Idempotency-Key');
      // A one-commit route has no lease to take over: it bounds the request's one transaction.
      const lease =
        ext.commit === 'one'
          ? `Runs in one transaction with its key, bounded by ${ext.lease} (no lease to wait out: a crashed attempt frees the key at once)`
          : `Lease ${ext.lease} (renewed while the request works)`;
      if (header) {
        header.description = `One unique value per operation (a UUID), sent unchanged with the same body on every retry. Bare (\`8e03978e-...\`) or an RFC 8941 quoted string (\`"8e03978e-..."\`): both are the same key. 1-255 printable ASCII characters. ${lease}; its response kept ${ext.retention} from the end of the operation; scoped to your client.`;
      }
      op.description = [
        op.description,
        `Idempotent: safe to retry with the same \`Idempotency-Key\`${ext.required ? ' (required)' : ''}. Retries replay the stored response with \`Idempotent-Replayed: true\`; responses are kept ${ext.retention} from the end of the operation; ${ext.commit === 'one' ? `one transaction, bounded by ${ext.lease}` : `lease ${ext.lease}`}.${o.policyUrl === undefined ? '' : ` See ${o.policyUrl}.`}`,
      ]
        .filter(Boolean)
        .join('\n\n');
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        if (!/^2\d\d$/.test(status) && status !== '402' && !(status === '422')) continue;
        response.headers = {
          ...response.headers,
          'Idempotent-Replayed': { description: 'true when this is a stored response replayed for a retry', schema: { type: 'string', enum: ['true'] } },
        };
      }
    }
  }
  return document;
}
