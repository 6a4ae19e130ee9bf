import { rm } from 'node:fs/promises';

export default async function globalTeardown() {
  const pg = globalThis.__EMBEDDED_PG__;
  if (pg) await pg.stop();
  if (globalThis.__EMBEDDED_PG_DIR__) await rm(globalThis.__EMBEDDED_PG_DIR__, { recursive: true, force: true });
}
