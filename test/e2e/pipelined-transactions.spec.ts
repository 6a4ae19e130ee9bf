import { AddressInfo, Server, Socket, createServer, connect } from 'node:net';
import type { PoolClient } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { PipelinedTransactionalAdapterTypeOrm, TransactionPipeline } from '../../src/idempotency/pipelined-transactions';
import { TestDatabase, createTestDatabase } from '../support/database';

/**
 * A TCP proxy in front of PostgreSQL that counts flights: runs of bytes the
 * client sends before the server answers. One flight is one round trip,
 * however the kernel splits or joins the bytes.
 */
async function startFlightCounter(upstream: URL): Promise<{ port: number; flights(): number; close(): Promise<void> }> {
  const [host, port] = [upstream.hostname, Number(upstream.port)];
  let flights = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    let clientSpoke = false;
    const db = connect(port, host);
    for (const s of [client, db]) sockets.add(s);
    client.on('data', (chunk) => {
      if (!clientSpoke) flights += 1;
      clientSpoke = true;
      db.write(chunk);
    });
    db.on('data', (chunk) => {
      clientSpoke = false;
      client.write(chunk);
    });
    client.on('close', () => db.destroy());
    db.on('close', () => client.destroy());
    client.on('error', () => db.destroy());
    db.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    flights: () => flights,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The statements under test, as the idempotency store writes a fenced one (an error when it matches nothing). */
const FENCED_UPDATE = `WITH fenced AS (UPDATE items SET v = $2 WHERE id = $1 RETURNING 1) SELECT 1 / count(*)::int AS fenced FROM fenced`;

describe('pipelined transactions (TransactionPipeline under the nestjs-cls TypeORM adapter)', () => {
  let db: TestDatabase;
  let proxy: Awaited<ReturnType<typeof startFlightCounter>>;
  let dataSource: DataSource;
  let wrap: (fn: (em: EntityManager) => Promise<unknown>, isolationLevel?: 'SERIALIZABLE') => Promise<unknown>;

  const rows = async () => (await dataSource.query<{ id: number; v: string }[]>('SELECT id, v FROM items ORDER BY id')).map((r) => `${r.id}:${r.v}`);
  /** Round trips `fn` took on the proxied connection. */
  const flightsOf = async (fn: () => Promise<unknown>): Promise<number> => {
    const before = proxy.flights();
    await fn().catch(() => undefined);
    return proxy.flights() - before;
  };
  const pipelineOf = async (em: EntityManager) => TransactionPipeline.of((await em.queryRunner!.connect()) as PoolClient)!;

  beforeAll(async () => {
    db = await createTestDatabase();
    const url = new URL(db.url);
    proxy = await startFlightCounter(url);
    url.host = `127.0.0.1:${proxy.port}`;
    // One pooled connection: every statement of the test goes over the same, already open socket.
    dataSource = new DataSource({ type: 'postgres', url: url.toString(), extra: { max: 1 } });
    await dataSource.initialize();
    await dataSource.query('CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)');
    const adapter = new PipelinedTransactionalAdapterTypeOrm({ dataSourceToken: DataSource });
    const options = adapter.optionsFactory(dataSource);
    wrap = (fn, isolationLevel) => {
      let em: EntityManager | undefined;
      return options.wrapWithTransaction(isolationLevel ? { isolationLevel } : ({} as never), () => fn(em!), (client) => (em = client));
    };
  });
  afterAll(async () => {
    await dataSource?.destroy();
    await proxy?.close();
    await db?.drop();
  });
  beforeEach(() => dataSource.query('TRUNCATE items'));

  it('sends BEGIN with the first statement, and the last one with COMMIT: 2 round trips where TypeORM alone takes 4', async () => {
    const stock = await flightsOf(() =>
      dataSource.transaction(async (em) => {
        await em.query('INSERT INTO items VALUES (1, $1)', ['a']);
        await em.query(FENCED_UPDATE, [1, 'b']);
      }),
    );
    const pipelined = await flightsOf(() =>
      wrap(async (em) => {
        await em.query('INSERT INTO items VALUES (2, $1)', ['a']);
        await (await pipelineOf(em)).commitWith(FENCED_UPDATE, [2, 'b']);
      }),
    );
    expect({ stock, pipelined }).toEqual({ stock: 4, pipelined: 2 });
    expect(await rows()).toEqual(['1:b', '2:b']);
  });

  it('a transaction that runs no statement sends nothing; the isolation level travels with BEGIN', async () => {
    expect(await flightsOf(() => wrap(async () => 'nothing'))).toBe(0);
    let level = '';
    const flights = await flightsOf(() =>
      wrap(async (em) => {
        [{ transaction_isolation: level }] = await em.query<{ transaction_isolation: string }[]>('SHOW transaction_isolation');
      }, 'SERIALIZABLE'),
    );
    expect(level).toBe('serializable');
    expect(flights).toBe(2); // BEGIN + SET TRANSACTION + SHOW, then COMMIT
  });

  it('when the fenced statement matches nothing, the COMMIT sent with it rolls the transaction back', async () => {
    await expect(
      wrap(async (em) => {
        await em.query('INSERT INTO items VALUES (1, $1)', ['written before the fence']);
        await (await pipelineOf(em)).commitWith(FENCED_UPDATE, [404, 'x']);
      }),
    ).rejects.toMatchObject({ code: '22012' });
    expect(await rows()).toEqual([]);
  });

  it('control: a statement that only counts 0 rows would let that COMMIT through (why the fence raises)', async () => {
    await wrap(async (em) => {
      await em.query('INSERT INTO items VALUES (1, $1)', ['committed']);
      await (await pipelineOf(em)).commitWith('UPDATE items SET v = $2 WHERE id = $1', [404, 'x']);
    });
    expect(await rows()).toEqual(['1:committed']);
  });

  it('a failing first statement rolls back, and the connection is clean for the next transaction', async () => {
    await dataSource.query(`INSERT INTO items VALUES (1, 'a')`);
    await expect(wrap((em) => em.query('INSERT INTO items VALUES (1, $1)', ['duplicate']))).rejects.toThrow(/duplicate key/);
    await wrap(async (em) => {
      await em.query('INSERT INTO items VALUES (2, $1)', ['b']);
      const [{ open }] = await em.query<{ open: boolean }[]>(`SELECT now() = statement_timestamp() AS open`);
      expect(open).toBe(false); // inside a transaction: now() is its start, not this statement's
    });
    expect(await rows()).toEqual(['1:a', '2:b']);
    // Not left in pipeline mode (where cursors and the `rows` option are refused).
    const runner = dataSource.createQueryRunner();
    const client = (await runner.connect()) as PoolClient & { pipeline: boolean };
    expect(client.pipeline).toBe(false);
    await runner.release();
  });

  it('nothing may follow the statement sent with COMMIT', async () => {
    await expect(
      wrap(async (em) => {
        await (await pipelineOf(em)).commitWith(`INSERT INTO items VALUES (1, 'a') RETURNING 1`);
        await em.query('INSERT INTO items VALUES (2, $1)', ['too late']);
      }),
    ).rejects.toThrow('the transaction has ended with its last statement');
    expect(await rows()).toEqual(['1:a']);
  });

  it('nested transactions (savepoints) and concurrent statements keep working', async () => {
    await wrap(async (em) => {
      await em.transaction(async (inner) => inner.query('INSERT INTO items VALUES (1, $1)', ['kept']));
      await em
        .transaction(async (inner) => {
          await inner.query('INSERT INTO items VALUES (2, $1)', ['undone']);
          throw new Error('undo the savepoint');
        })
        .catch(() => undefined);
      await Promise.all([em.query('INSERT INTO items VALUES (3, $1)', ['c']), em.query('INSERT INTO items VALUES (4, $1)', ['d'])]);
      await (await pipelineOf(em)).commitWith(FENCED_UPDATE, [3, 'c2']);
    });
    expect(await rows()).toEqual(['1:kept', '3:c2', '4:d']);
  });
});
