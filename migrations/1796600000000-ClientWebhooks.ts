import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhooks to the API's clients. `webhook_endpoints`: where a client wants its
 * events, and the signing secret (sealed with the key ring when one is set:
 * endpoint-secrets.ts). `events`: every state change of a payment, refund or
 * order, written in the change's transaction; `seq` orders them (newest first,
 * the cursor resolved to it inside the query). `webhook_deliveries`: each
 * attempt to deliver an event to an endpoint, with its answer's status and an
 * excerpt of its body, or the error. Every key includes client_id (sharding).
 */
export class ClientWebhooks1796600000000 implements MigrationInterface {
  name = 'ClientWebhooks1796600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE webhook_endpoints (
        client_id uuid NOT NULL,
        id uuid NOT NULL,
        url text NOT NULL,
        event_types text[] NOT NULL,
        secret text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (client_id, id),
        CONSTRAINT webhook_endpoints_client_fkey FOREIGN KEY (client_id) REFERENCES clients (id),
        CONSTRAINT webhook_endpoints_event_types_check CHECK (cardinality(event_types) BETWEEN 1 AND 50)
      )`);
    await q.query(`
      CREATE TABLE events (
        client_id uuid NOT NULL,
        id text NOT NULL,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        type text NOT NULL,
        data jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT events_pkey PRIMARY KEY (client_id, id),
        CONSTRAINT events_client_fkey FOREIGN KEY (client_id) REFERENCES clients (id)
      )`);
    await q.query('CREATE INDEX events_client_seq_idx ON events (client_id, seq)');
    await q.query(`
      CREATE TABLE webhook_deliveries (
        client_id uuid NOT NULL,
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        event_id text NOT NULL,
        endpoint_id uuid NOT NULL,
        message_id uuid NOT NULL,
        attempt int NOT NULL,
        status int,
        response_excerpt text,
        error text,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (client_id, id),
        CONSTRAINT webhook_deliveries_event_fkey FOREIGN KEY (client_id, event_id) REFERENCES events (client_id, id)
      )`);
    await q.query('CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (client_id, event_id, created_at)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE webhook_deliveries');
    await q.query('DROP TABLE events');
    await q.query('DROP TABLE webhook_endpoints');
  }
}
