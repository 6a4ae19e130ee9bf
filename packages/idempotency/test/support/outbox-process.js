// A process of its own for the outbox suites, run on the built library
// (packages/idempotency/dist). OUTBOX_MODE:
// - `relay`: an app with IdempotencyModule whose outbox publisher POSTs each
//   message to RECEIVER_URL with the message id as Idempotency-Key (lease
//   LEASE, horizon HORIZON; TRANSACTION_POOLER=1 when DATABASE_URL is a
//   PgBouncer in transaction mode); prints `ready` once started.
// - `naive`: the control without an outbox: commits a row, prints `committed`,
//   then a moment later prints `sending` and sends to RECEIVER_URL from the same
//   code path.
'use strict';
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { TypeOrmModule } = require('@nestjs/typeorm');
const { Client } = require('pg');
const { IdempotencyModule } = require('../../dist');

const { OUTBOX_MODE, DATABASE_URL, RECEIVER_URL, LEASE = '2s', HORIZON = '3d', TRANSACTION_POOLER } = process.env;

function send(id, body, signal) {
  return fetch(RECEIVER_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': id, 'x-relay-pid': String(process.pid) },
    body: JSON.stringify(body),
    signal,
  }).then((res) => {
    if (!res.ok) throw new Error(`the receiver answered ${res.status}`);
  });
}

async function relay() {
  class RelayModule {}
  Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: DATABASE_URL }),
      IdempotencyModule.forRoot({
        purge: { enabled: false },
        recovery: { enabled: false },
        postgres: { transactionPooler: TRANSACTION_POOLER === '1' },
        outbox: {
          lease: LEASE,
          horizon: HORIZON,
          publish: (m, signal) => send(m.id, { topic: m.topic, payload: m.payload, stream: m.stream, attempt: m.attempt }, signal),
        },
      }),
    ],
  })(RelayModule);
  const app = await NestFactory.createApplicationContext(RelayModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  process.stdout.write('ready\n');
}

async function naive() {
  const client = new Client({ connectionString: DATABASE_URL });
  await client.connect();
  const id = process.env.ORDER_ID;
  await client.query('BEGIN');
  await client.query('INSERT INTO naive_orders (id) VALUES ($1)', [id]);
  await client.query('COMMIT');
  process.stdout.write('committed\n');
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  // Told before the request leaves: a control killed before this line sent nothing.
  process.stdout.write('sending\n');
  await send(id, { topic: 'order.confirmed', payload: { id } });
  process.stdout.write('sent\n');
  await client.end();
}

(OUTBOX_MODE === 'naive' ? naive() : relay()).catch((error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
