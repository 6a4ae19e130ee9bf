-- The idempotency module's table, for a database managed without TypeORM
-- migrations: the schema that createIdempotencyMigrations() ends with (a test
-- keeps the two identical). With IdempotencyModule.forRoot({ tableName }),
-- replace idempotency_keys everywhere below with that name.
--
-- id is the key's row id: the first 16 bytes of SHA-256(scope, NUL, key) as a
-- uuid (keyId / keyIdSql in the module); neither the scope nor the key is stored.
-- The row id of key K of principal P, for an operator:
--   SELECT * FROM idempotency_keys WHERE id = encode(substring(sha256(
--     convert_to('P', 'UTF8') || '\x00'::bytea || convert_to('K', 'UTF8')) FROM 1 FOR 16), 'hex')::uuid;
CREATE TABLE idempotency_keys (
  id uuid NOT NULL,
  lease bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  status smallint,
  fingerprint bytea NOT NULL,
  body text,
  headers text,
  recovery jsonb,
  CONSTRAINT idempotency_keys_pkey PRIMARY KEY (id),
  CONSTRAINT idempotency_keys_fingerprint_length CHECK (octet_length(fingerprint) = 16)
);
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);
CREATE INDEX idempotency_keys_recovery_idx ON idempotency_keys (lease) WHERE recovery IS NOT NULL;
