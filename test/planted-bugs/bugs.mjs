/**
 * Realistic bugs, each planted alone into a copy of the sources by run.mjs, and
 * the test files expected to catch it. A bug whose `find` text is no longer in
 * its file, or is there more than once, fails the run (and
 * test/unit/planted-bugs.spec.ts in `npm test`): the list must follow the code
 * it breaks.
 */
const STATEMENTS = 'packages/idempotency/src/stores/postgres/statements.ts';
const STORE_TESTS = ['packages/idempotency/test/store-contract/postgres.spec.ts', 'packages/idempotency/test/model/model.spec.ts'];

export const BUGS = [
  {
    id: 'claim-with-two-owners',
    what: 'a claim that, meeting a concurrent insert of the key, takes the key too: several identical requests each own it and run',
    file: STATEMENTS,
    find: `  ON CONFLICT (id) DO NOTHING
  RETURNING lease`,
    replace: `  ON CONFLICT (id) DO UPDATE SET lease = EXCLUDED.lease
  RETURNING lease`,
    tests: [
      'test/e2e/race/payments-race.spec.ts',
      'test/e2e/fault/two-instances.spec.ts',
      'packages/idempotency/test/e2e/idempotency-contract.spec.ts',
      'packages/idempotency/test/store-contract/postgres.spec.ts',
    ],
  },
  {
    id: 'takeover-without-compare-and-set',
    what: 'a takeover that checks neither the lease it read nor that it has ended: several claims past the lease all win',
    file: STATEMENTS,
    find: ` WHERE id = $1::uuid AND lease = $2::int8
   AND status IS NULL AND lease <= \${NOW_US}`,
    replace: ` WHERE id = $1::uuid AND $2::int8 IS NOT NULL
   AND status IS NULL`,
    tests: STORE_TESTS,
  },
  {
    id: 'completion-ignores-lost-lease',
    what: "a completion not fenced on the owner's token: an owner whose key was taken over still commits",
    file: STATEMENTS,
    find: `       expires_at = now() + $6::int8 * interval '1 millisecond'
 WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL`,
    replace: `       expires_at = now() + $6::int8 * interval '1 millisecond'
 WHERE id = $1::uuid AND $2::int8 IS NOT NULL AND status IS NULL`,
    // The e2e owners complete while the takeover still runs: only the token refuses them.
    tests: [...STORE_TESTS, 'test/e2e/fault/slow-worker.spec.ts', 'packages/idempotency/test/e2e/idempotency-contract.spec.ts'],
  },
  {
    id: 'renewal-without-fence',
    what: 'a renewal that any owner gets, stale ones too: a lost lease comes back',
    file: STATEMENTS,
    find: ` WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL
RETURNING lease::text AS lease\`;

// A phase's recovery point`,
    replace: ` WHERE id = $1::uuid AND $2::int8 IS NOT NULL AND status IS NULL
RETURNING lease::text AS lease\`;

// A phase's recovery point`,
    tests: STORE_TESTS,
  },
  {
    id: 'recovery-point-ignores-lost-lease',
    what: "a recovery point that matches no row without an error: sent with its phase's COMMIT, a stale owner's phase commits",
    file: STATEMENTS,
    find: 'SELECT 1 / count(*) AS checkpointed FROM checkpointed',
    replace: 'SELECT 1 AS checkpointed FROM (SELECT count(*) FROM checkpointed) c',
    tests: ['packages/idempotency/test/store-contract/postgres.spec.ts'],
  },
  {
    id: 'retention-from-first-request',
    what: 'retention counted from the claim, not from the outcome: a slow operation is forgotten soon after it ends',
    file: STATEMENTS,
    find: `recovery = NULL,
       expires_at = now() + $6::int8 * interval '1 millisecond'`,
    replace: `recovery = NULL,
       expires_at = expires_at + $6::int8 * interval '0 millisecond'`,
    tests: STORE_TESTS,
  },
  {
    id: 'release-of-a-completed-key',
    what: 'a release that also deletes a completed key: a retry after a lost answer runs again',
    file: STATEMENTS,
    find: `   WHERE id = $1::uuid AND lease = $2::int8 AND status IS NULL AND recovery IS NULL
  RETURNING 1`,
    replace: `   WHERE id = $1::uuid AND recovery IS NULL
  RETURNING 1`,
    tests: STORE_TESTS,
  },
  {
    id: 'fingerprint-ignored',
    what: "a claim that never compares the request's fingerprint: another body under the key replays the first",
    file: STATEMENTS,
    find: 'SELECT lease, fingerprint = $2::bytea AS same,',
    replace: 'SELECT lease, $2::bytea IS NOT NULL AS same,',
    tests: [...STORE_TESTS, 'packages/idempotency/test/e2e/idempotency.spec.ts'],
  },
  {
    id: 'pipelined-refusal-ignored',
    what: "a key's last write sent with COMMIT whose refusal is never read: an owner that lost its key is told its response stands",
    file: 'packages/idempotency/src/stores/postgres/key-queries.ts',
    find: '      unit.last = answer;',
    replace: '      unit.last = answer.then(() => undefined);',
    tests: ['packages/idempotency/test/store-contract/postgres.spec.ts', 'test/e2e/fault/slow-worker.spec.ts', 'packages/idempotency/test/e2e/idempotency-contract.spec.ts'],
  },
  {
    id: 'fingerprint-without-body',
    what: 'a fingerprint of the method and path only: another body under the same key is replayed, not refused',
    file: 'packages/idempotency/src/core/fingerprint.ts',
    find: '.update(canonicalJson(body))',
    replace: ".update('')",
    tests: ['packages/idempotency/test/unit/fingerprint.spec.ts', 'packages/idempotency/test/e2e/idempotency.spec.ts'],
  },
  {
    id: 'replay-with-route-status',
    what: "a replay sent with the route's status instead of the stored one: a stored 402 replays as 201",
    file: 'packages/idempotency/src/http/idempotency.interceptor.ts',
    find: '    res.setStatus(response.status);\n',
    replace: '    if (!replayed) res.setStatus(response.status);\n',
    tests: ['packages/idempotency/test/e2e/idempotency.spec.ts', 'packages/idempotency/test/e2e/idempotency-contract.spec.ts'],
  },
  {
    id: 'claims-from-a-replica',
    what: 'claims and replay lookups sent to a read replica: a lagging replica sees no key and the retry charges again',
    file: 'packages/idempotency/src/stores/postgres/claim-pool.ts',
    // The claim pool's (primaryClientConfig has the same line).
    find: `    extra?: { connectionTimeoutMillis?: number; query_timeout?: number };
  };
  const o: Credentials = options.replication?.master ?? options;`,
    replace: `    extra?: { connectionTimeoutMillis?: number; query_timeout?: number };
  };
  const o: Credentials = (options.replication as { slaves?: Credentials[] } | undefined)?.slaves?.[0] ?? options.replication?.master ?? options;`,
    tests: ['test/e2e/replicas.spec.ts'],
  },
  {
    id: 'webhook-event-processed-twice',
    what: "an idempotent consumer whose claim of the message id also wins for a repeat: a card network's webhook event is applied twice",
    file: 'packages/idempotency/src/consumer/idempotent-consumer.ts',
    find: 'ON CONFLICT (source, message_id) DO NOTHING RETURNING 1 AS claimed',
    replace: 'ON CONFLICT (source, message_id) DO UPDATE SET expires_at = EXCLUDED.expires_at RETURNING 1 AS claimed',
    tests: ['packages/idempotency/test/contexts/idempotent-consumer.spec.ts', 'test/e2e/webhooks.spec.ts'],
  },
  {
    id: 'charge-released-on-an-ambiguous-answer',
    what: 'a payment released when the card network answered nothing usable (a timeout, a 5xx): the retry charges a second time',
    file: 'src/payments/charges/payment-charge.ts',
    find: `      if (error instanceof CardNetworkRefusedError && error.definitive) return this.releaseUncharged(op, payment, 'refused', error.message);
      throw unknownOutcome(error);`,
    replace: `      if (error instanceof CardNetworkRefusedError && error.definitive) return this.releaseUncharged(op, payment, 'refused', error.message);
      await op.release(() => this.payments.deleteProcessing(op.scope, payment.id));
      throw unknownOutcome(error);`,
    tests: ['test/e2e/provider-truth.spec.ts', 'test/e2e/payments.spec.ts'],
  },
  {
    id: 'refund-released-on-a-refused-resend',
    what: 'a refund released when a resend is refused: an earlier send may have refunded, and the amount is refundable again',
    file: 'src/payments/refunds/refunds.service.ts',
    find: 'if (firstContact && error.firstSend) {',
    replace: 'if (firstContact || error.firstSend || !firstContact) {',
    tests: ['test/e2e/refund-states.spec.ts', 'test/e2e/provider-truth.spec.ts'],
  },
  {
    id: 'operator-fail-without-the-network',
    what: "an operator's fail applied when the network cannot be asked: a payment it charged is recorded failed, its order paid again",
    file: 'src/payments/charges/payments.service.ts',
    find: `      return this.attention.waitForNetwork(op, row, error);
    }
    if (state.status !== 'failed')`,
    replace: `      state = { status: 'failed', failure: 'canceled' };
    }
    if (state.status !== 'failed')`,
    tests: ['test/e2e/attention-network-word.spec.ts'],
  },
];
