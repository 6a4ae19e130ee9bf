import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { migrations } from '../../migrations';
import { TestDatabase, createTestDatabase } from '../support/database';

/**
 * Ready for sharding, checked: after every migration, the live schema (read
 * from pg_catalog) obeys the rules a distributed PostgreSQL such as Citus
 * enforces, under the plan of docs/scale-out.md. Every table of the schema is
 * classified below; a new table fails this suite until it is classified.
 *
 * For a distributed table, Citus requires that every primary key, unique
 * constraint, unique index and exclusion constraint contains the distribution
 * column, and that a foreign key either points at a reference table or joins
 * two co-located distributed tables on their distribution columns. A reference
 * table (copied to every node) may only reference reference tables. Nothing
 * here runs Citus: it checks the schema against those rules.
 */
type Placement =
  /** Sharded by `column`; tables of one `colocation` group keep a tenant's rows on the same node. */
  | { kind: 'distributed'; column: string; colocation: string }
  /** Small, read on every request, copied to every node. */
  | { kind: 'reference' }
  /** Stays on the coordinator only. */
  | { kind: 'local' };

const PLAN: Record<string, Placement> = {
  // The tenant tables: every row is one client's, every statement filters by client_id.
  orders: { kind: 'distributed', column: 'client_id', colocation: 'tenant' },
  payments: { kind: 'distributed', column: 'client_id', colocation: 'tenant' },
  refunds: { kind: 'distributed', column: 'client_id', colocation: 'tenant' },
  // Operations handed to a person: each row is one client's payment or refund.
  operation_attention: { kind: 'distributed', column: 'client_id', colocation: 'tenant' },
  // The clients' webhooks: their endpoints, their events, each delivery attempt.
  webhook_endpoints: { kind: 'distributed', column: 'client_id', colocation: 'tenant' },
  events: { kind: 'distributed', column: 'client_id', colocation: 'tenant' },
  webhook_deliveries: { kind: 'distributed', column: 'client_id', colocation: 'tenant' },
  // id = hash of (scope, key): already uniform, and every statement of a key filters by it.
  idempotency_keys: { kind: 'distributed', column: 'id', colocation: 'idempotency_keys' },
  // One row per processed webhook event, looked up by (source, message_id).
  idempotency_messages: { kind: 'distributed', column: 'message_id', colocation: 'idempotency_messages' },
  // Authentication reads these before any client_id is known (by key hash).
  clients: { kind: 'reference' },
  client_keys: { kind: 'reference' },
  // The outbox: the relay's claim reads the due messages of every lane (SKIP LOCKED, each stream in order), a queue on the coordinator.
  idempotency_outbox: { kind: 'local' },
  // The refund settlement job's one cursor and lease for the fleet: a single row that walks every client's refunds.
  refund_settlement_cursor: { kind: 'local' },
  // TypeORM's list of applied migrations: the coordinator's bookkeeping.
  migrations: { kind: 'local' },
};

interface Key {
  table: string;
  name: string;
  /** p primary key, u unique constraint, x exclusion constraint, i a unique index that is no constraint. */
  type: 'p' | 'u' | 'x' | 'i';
  /** Column names; null for an expression. */
  columns: (string | null)[];
}

interface ForeignKey {
  table: string;
  name: string;
  columns: string[];
  references: string;
  referencedColumns: string[];
}

async function readSchema(client: Client) {
  const tables = (
    await client.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') ORDER BY 1`,
    )
  ).rows.map((r) => r.name);
  const columnTypes = new Map(
    (
      await client.query<{ table: string; column: string; type: string; not_null: boolean }>(
        `SELECT c.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped`,
      )
    ).rows.map((r) => [`${r.table}.${r.column}`, r]),
  );
  // Every unique index (a primary key's and a unique constraint's included), partial or not, and every exclusion constraint.
  const keys = (
    await client.query<Key>(
      `SELECT t.relname AS table, i.relname AS name,
              CASE con.contype WHEN 'p' THEN 'p' WHEN 'u' THEN 'u' WHEN 'x' THEN 'x' ELSE 'i' END AS type,
              array(SELECT a.attname::text FROM unnest(x.indkey[0:x.indnkeyatts - 1]) WITH ORDINALITY AS k(attnum, n)
                      LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum AND k.attnum <> 0
                     ORDER BY k.n) AS columns
         FROM pg_index x
         JOIN pg_class i ON i.oid = x.indexrelid
         JOIN pg_class t ON t.oid = x.indrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace
         LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid AND con.conrelid = t.oid
        WHERE n.nspname = current_schema() AND (x.indisunique OR con.contype = 'x')
        ORDER BY 1, 2`,
    )
  ).rows;
  const foreignKeys = (
    await client.query<ForeignKey>(
      `SELECT t.relname AS table, con.conname AS name, r.relname AS references,
              array(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, n)
                      JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum ORDER BY k.n) AS columns,
              array(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, n)
                      JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum ORDER BY k.n) AS "referencedColumns"
         FROM pg_constraint con
         JOIN pg_class t ON t.oid = con.conrelid
         JOIN pg_class r ON r.oid = con.confrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE n.nspname = current_schema() AND con.contype = 'f'
        ORDER BY 1, 2`,
    )
  ).rows;
  return { tables, columnTypes, keys, foreignKeys };
}

/** Every way the live schema breaks the plan, one sentence each; empty when it is ready. */
async function shardingProblems(client: Client, plan: Record<string, Placement>): Promise<string[]> {
  const { tables, columnTypes, keys, foreignKeys } = await readSchema(client);
  const problems: string[] = [];
  for (const table of tables) {
    if (!plan[table]) problems.push(`${table}: not classified (distributed by which column, reference or local?)`);
  }
  for (const table of Object.keys(plan)) {
    if (!tables.includes(table)) problems.push(`${table}: classified, but no such table (remove it from the plan)`);
  }
  const groupTypes = new Map<string, string>();
  for (const table of tables) {
    const placement = plan[table];
    if (placement?.kind !== 'distributed') continue;
    const column = columnTypes.get(`${table}.${placement.column}`);
    if (!column) {
      problems.push(`${table}: has no distribution column ${placement.column}`);
      continue;
    }
    if (!column.not_null) problems.push(`${table}.${placement.column}: the distribution column must be NOT NULL`);
    // Co-located tables hash the same type the same way.
    const type = groupTypes.get(placement.colocation);
    if (type === undefined) groupTypes.set(placement.colocation, column.type);
    else if (type !== column.type) problems.push(`${table}.${placement.column}: ${column.type}, but its co-location group "${placement.colocation}" is ${type}`);
    if (!keys.some((k) => k.table === table && k.type === 'p')) problems.push(`${table}: no primary key`);
  }
  for (const key of keys) {
    const placement = plan[key.table];
    if (placement?.kind !== 'distributed') continue;
    if (!key.columns.includes(placement.column)) {
      const what = { p: 'primary key', u: 'unique constraint', x: 'exclusion constraint', i: 'unique index' }[key.type];
      problems.push(`${key.table}: ${what} ${key.name} (${key.columns.map((c) => c ?? '<expression>').join(', ')}) lacks the distribution column ${placement.column}`);
    }
  }
  for (const fk of foreignKeys) {
    const from = plan[fk.table];
    const to = plan[fk.references];
    if (!from || !to) continue; // reported above
    const label = `${fk.table}: foreign key ${fk.name} (${fk.columns.join(', ')}) -> ${fk.references} (${fk.referencedColumns.join(', ')})`;
    if (to.kind === 'reference') continue; // any table may reference a reference table
    if (from.kind !== 'distributed' || to.kind !== 'distributed') {
      problems.push(`${label}: a ${from.kind} table cannot reference a ${to.kind} table`);
      continue;
    }
    if (from.colocation !== to.colocation) {
      problems.push(`${label}: ${fk.table} and ${fk.references} are not co-located`);
      continue;
    }
    const at = fk.columns.indexOf(from.column);
    if (at < 0 || fk.referencedColumns[at] !== to.column) {
      problems.push(`${label}: must join ${fk.table}.${from.column} to ${fk.references}.${to.column}`);
    }
  }
  return problems;
}

describe('the schema is ready for sharding by client (e2e)', () => {
  let db: TestDatabase;
  let client: Client;

  beforeAll(async () => {
    db = await createTestDatabase();
    const ds = await new DataSource({ type: 'postgres', url: db.url, migrations, migrationsTableName: 'migrations' }).initialize();
    try {
      await ds.runMigrations({ transaction: 'each' });
    } finally {
      await ds.destroy();
    }
    client = new Client({ connectionString: db.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await db?.drop();
  });

  it('after every migration, every table is classified and obeys the rules of its placement', async () => {
    expect(await shardingProblems(client, PLAN)).toEqual([]);
  });

  it('catches what Citus would refuse: an unclassified table, a key or a foreign key without the distribution column', async () => {
    await client.query('BEGIN');
    try {
      await client.query('CREATE TABLE payouts (id uuid PRIMARY KEY, client_id uuid NOT NULL)');
      await client.query('ALTER TABLE payments ADD CONSTRAINT payments_network_charge_unique UNIQUE (network_charge_id)');
      await client.query('CREATE UNIQUE INDEX refunds_network_refund_idx ON refunds (network_refund_id)');
      // A foreign key that includes client_id but joins it to the wrong column.
      await client.query('CREATE UNIQUE INDEX payments_id_client_idx ON payments (id, client_id)');
      await client.query('ALTER TABLE refunds ADD CONSTRAINT refunds_crossed_fkey FOREIGN KEY (client_id, payment_id) REFERENCES payments (id, client_id)');
      await client.query('ALTER TABLE client_keys ADD COLUMN order_id uuid, ADD COLUMN order_client_id uuid');
      await client.query('ALTER TABLE client_keys ADD CONSTRAINT client_keys_order_fkey FOREIGN KEY (order_client_id, order_id) REFERENCES orders (client_id, id)');
      const problems = await shardingProblems(client, PLAN);
      expect(problems).toEqual(
        expect.arrayContaining([
          'payouts: not classified (distributed by which column, reference or local?)',
          expect.stringMatching(/^payments: unique constraint payments_network_charge_unique \(network_charge_id\) lacks the distribution column client_id$/),
          expect.stringMatching(/^refunds: unique index refunds_network_refund_idx \(network_refund_id\) lacks the distribution column client_id$/),
          expect.stringMatching(/^refunds: foreign key refunds_crossed_fkey .* must join refunds\.client_id to payments\.client_id$/),
          expect.stringMatching(/^client_keys: foreign key client_keys_order_fkey .* a reference table cannot reference a distributed table$/),
        ]),
      );
    } finally {
      await client.query('ROLLBACK');
    }
    // Rolled back: the schema is ready again.
    expect(await shardingProblems(client, PLAN)).toEqual([]);
  });
});
