-- The idempotency module's table, for a database managed without TypeORM
-- migrations: the schema that createIdempotencyMigrations() ends with (a test
-- keeps the two identical). With IdempotencyModule.forRoot({ tableName }),
-- replace idempotency_keys everywhere below with that name.
CREATE TABLE idempotency_keys (
  client_id text NOT NULL,
  key text NOT NULL,
  fingerprint bytea NOT NULL,
  lease bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  status smallint,
  body text,
  headers text,
  recovery jsonb,
  CONSTRAINT idempotency_keys_pkey PRIMARY KEY (client_id, key),
  CONSTRAINT idempotency_keys_fingerprint_length CHECK (octet_length(fingerprint) = 32)
);
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);
CREATE INDEX idempotency_keys_recovery_idx ON idempotency_keys (lease) WHERE recovery IS NOT NULL;
