import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Orders, payments and refunds. Every table carries client_id and every primary,
 * unique and foreign key includes it, so a distributed PostgreSQL can shard all
 * of them by client (see docs/scale-out.md).
 */
export class CreateOrdersPaymentsRefunds1764460800002 implements MigrationInterface {
  name = 'CreateOrdersPaymentsRefunds1764460800002';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE orders (
        client_id uuid NOT NULL,
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        status text NOT NULL,
        currency text NOT NULL,
        amount_total bigint NOT NULL,
        items jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT orders_pkey PRIMARY KEY (client_id, id),
        CONSTRAINT orders_client_fkey FOREIGN KEY (client_id) REFERENCES clients (id),
        CONSTRAINT orders_status_check CHECK (status IN ('pending', 'paid', 'canceled')),
        CONSTRAINT orders_currency_check CHECK (currency ~ '^[a-z]{3}$'),
        CONSTRAINT orders_amount_total_check CHECK (amount_total >= 0)
      )`);
    await q.query('CREATE INDEX orders_client_created_idx ON orders (client_id, created_at, id)');
    await q.query(`
      CREATE TABLE payments (
        client_id uuid NOT NULL,
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        order_id uuid,
        status text NOT NULL,
        amount bigint NOT NULL,
        currency text NOT NULL,
        description text,
        failure_code text,
        network_charge_id text,
        amount_refunded bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT payments_pkey PRIMARY KEY (client_id, id),
        CONSTRAINT payments_client_fkey FOREIGN KEY (client_id) REFERENCES clients (id),
        CONSTRAINT payments_order_fkey FOREIGN KEY (client_id, order_id) REFERENCES orders (client_id, id),
        CONSTRAINT payments_status_check CHECK (status IN ('succeeded', 'failed')),
        CONSTRAINT payments_amount_check CHECK (amount BETWEEN 1 AND 99999999),
        CONSTRAINT payments_currency_check CHECK (currency ~ '^[a-z]{3}$'),
        CONSTRAINT payments_refunded_check CHECK (amount_refunded BETWEEN 0 AND amount)
      )`);
    await q.query('CREATE INDEX payments_client_created_idx ON payments (client_id, created_at, id)');
    await q.query(
      `CREATE UNIQUE INDEX payments_one_success_per_order ON payments (client_id, order_id) WHERE status = 'succeeded' AND order_id IS NOT NULL`,
    );
    await q.query(`
      CREATE TABLE refunds (
        client_id uuid NOT NULL,
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        payment_id uuid NOT NULL,
        amount bigint NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT refunds_pkey PRIMARY KEY (client_id, id),
        CONSTRAINT refunds_payment_fkey FOREIGN KEY (client_id, payment_id) REFERENCES payments (client_id, id),
        CONSTRAINT refunds_amount_check CHECK (amount > 0)
      )`);
    await q.query('CREATE INDEX refunds_payment_idx ON refunds (client_id, payment_id, created_at)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE refunds');
    await q.query('DROP TABLE payments');
    await q.query('DROP TABLE orders');
  }
}
