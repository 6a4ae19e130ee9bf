import { Body, Controller, Module, Post, Type } from '@nestjs/common';
import { Registry } from 'prom-client';
import request from 'supertest';
import { IdempotencyModuleOptions, Idempotent, Operation, PhasedOperation } from 'safe-retries';
import { IdempotencyStore } from 'safe-retries/testing';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { keyId } from '../support/keys-table';
import { resolvedOptions } from '../support/resolved-options';

/**
 * Which store and commit mode a route gets, decided once at startup, as an app
 * meets it: a route that commits its key durably has its claim committed while
 * its handler works (its row is there for any session to see); one whose key
 * commits with the handler's writes ('one') has none until then. The store
 * given as `stores.redis` is a plain object: only its shape matters (it has no
 * one-commit claims), and no request reaches it.
 */
const gates = new Map<string, { reached(): void; opened: Promise<void> }>();
/** The handler's work: it tells the test it runs, then waits for the test to let it end. */
const held = async (body: { key: string }) => {
  const gate = gates.get(body.key);
  gate?.reached();
  await gate?.opened;
  return {};
};

@Controller('stores')
class Routes {
  @Post('module')
  @Idempotent()
  module(@Body() body: { key: string }) {
    return held(body);
  }

  @Post('one')
  @Idempotent({ commit: 'one' })
  one(@Body() body: { key: string }) {
    return held(body);
  }

  @Post('durable')
  @Idempotent({ commit: 'durable' })
  durable(@Body() body: { key: string }) {
    return held(body);
  }

  @Post('phased')
  @Idempotent({ phased: 'stores-phased' })
  async phased(@Body() body: { key: string }, @Operation() op: PhasedOperation<object>) {
    await held(body);
    return op.finish(async () => ({}));
  }
}

@Controller('other-store')
class OtherStoreRoute {
  @Post()
  @Idempotent({ store: 'redis' })
  create() {}
}

@Controller('other-store-one')
class OtherStoreInOneCommit {
  @Post()
  @Idempotent({ store: 'redis', commit: 'one' })
  create() {}
}

@Controller('phased-one')
class PhasedInOneCommit {
  @Post()
  @Idempotent({ phased: 'op', commit: 'one' })
  create() {}
}

const moduleOf = (controller: Type) => {
  @Module({ controllers: [controller] })
  class RoutesModule {}
  return RoutesModule;
};

const otherStore = {} as IdempotencyStore;
const app = (idempotency: IdempotencyModuleOptions, ...controllers: Type[]) =>
  createLibraryApp('express', { idempotency, imports: controllers.map(moduleOf) });

/** Whether the key's claim is committed (its row seen from another session) while the route's handler works. */
async function claimCommittedWhileWorking(lib: LibraryApp, route: string): Promise<boolean> {
  const key = `${route}-${Math.random()}`;
  let release!: () => void;
  let reached!: () => void;
  const running = new Promise<void>((resolve) => (reached = resolve));
  gates.set(key, { reached, opened: new Promise<void>((resolve) => (release = resolve)) });
  const answered = request(lib.app.getHttpServer()).post(`/stores/${route}`).set(PRINCIPAL_HEADER, 'stores').set('Idempotency-Key', key).send({ key }).then((r) => r);
  await running;
  const [{ count }] = await lib.dataSource.query<{ count: number }[]>(`SELECT count(*)::int AS count FROM "${LIBRARY_TABLE}" WHERE id = $1`, [keyId('stores', key)]);
  release();
  expect((await answered).status).toBe(201);
  const [{ stored }] = await lib.dataSource.query<{ stored: number }[]>(`SELECT count(*)::int AS stored FROM "${LIBRARY_TABLE}" WHERE id = $1 AND status = 201`, [keyId('stores', key)]);
  expect(stored).toBe(1);
  return count === 1;
}

describe("a route's store and commit mode", () => {
  it("gives a route that asks for commit 'one' its store's one-commit claims", async () => {
    const lib = await app({}, Routes);
    try {
      expect(await claimCommittedWhileWorking(lib, 'one')).toBe(false);
      expect(await claimCommittedWhileWorking(lib, 'module')).toBe(true);
    } finally {
      await lib.close();
    }
  });

  it("applies the module's commit 'one' to non-phased routes of a store that has it, and to no other", async () => {
    // A route of the other store starts in such a module: 'one' is not applied to it.
    const lib = await app({ commit: 'one', stores: { redis: otherStore } }, Routes, OtherStoreRoute);
    try {
      expect(await claimCommittedWhileWorking(lib, 'module')).toBe(false);
      expect(await claimCommittedWhileWorking(lib, 'durable')).toBe(true);
      expect(await claimCommittedWhileWorking(lib, 'phased')).toBe(true);
    } finally {
      await lib.close();
    }
  });

  it("refuses at startup, in one line, commit 'one' on a store without it and on a phased route", async () => {
    await expect(app({ stores: { redis: otherStore } }, OtherStoreInOneCommit)).rejects.toThrow(
      "@Idempotent() on OtherStoreInOneCommit.create: commit 'one' needs a store that claims inside the handler's transaction (the key commits with its writes); the redis store cannot: drop commit or use store 'postgres'",
    );
    await expect(app({}, PhasedInOneCommit)).rejects.toThrow(
      "@Idempotent() on PhasedInOneCommit.create: commit 'one' is for a route whose whole effect is one transaction; a phased route commits in each phase: drop commit or phased",
    );
  });

  it('refuses at startup, in one line, a route that names a store the module was not given', async () => {
    const lib = await app({}, Routes);
    try {
      expect(await claimCommittedWhileWorking(lib, 'module')).toBe(true);
    } finally {
      await lib.close();
    }
    await expect(app({}, OtherStoreRoute)).rejects.toThrow(
      "@Idempotent() on OtherStoreRoute.create: store 'redis' needs IdempotencyModule's stores.redis (new RedisIdempotencyStore({ url }) from safe-retries/redis)",
    );
  });

  it('times every claim of the store a route uses, durable or one-commit', async () => {
    const registry = new Registry();
    const claims = async () => {
      const { values } = await registry.getSingleMetric('idempotency_claim_duration_seconds')!.get();
      return values.find((v) => (v as { metricName?: string }).metricName === 'idempotency_claim_duration_seconds_count')?.value ?? 0;
    };
    const lib = await app({ registry }, Routes);
    try {
      const send = (route: string) => request(lib.app.getHttpServer()).post(`/stores/${route}`).set(PRINCIPAL_HEADER, 'stores').set('Idempotency-Key', `${route}-${Math.random()}`).send({ key: 'timed' });
      expect((await send('durable')).status).toBe(201);
      expect((await send('one')).status).toBe(201);
      expect(await claims()).toBe(2);
    } finally {
      await lib.close();
    }
  });

  it('refuses an unknown module commit mode', async () => {
    await expect(resolvedOptions({ commit: 'twice' as never })).rejects.toThrow('IdempotencyModule: commit must be durable or one, not twice');
  });
});
