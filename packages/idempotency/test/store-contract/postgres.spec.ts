import { randomBytes } from 'node:crypto';
import { describeStoreContract } from 'safe-retries/testing';
import { postgresStoreSubject } from '../support/store-apps';

// The PostgreSQL store keeps the whole contract, its optional parts too (its
// core cases run again with one-commit claims); with node-postgres clients that
// pipeline (a unit's last write sent with its COMMIT); with
// responses sealed at rest, and with statements sent unnamed (behind a pooler).
const parts = { recovery: true, settlement: true, oneCommit: true };

describeStoreContract('PostgreSQL', () => postgresStoreSubject(), { parts });

describeStoreContract('PostgreSQL, pipelined clients', () => postgresStoreSubject({}, undefined, { pipeline: true }), { parts });

describeStoreContract(
  'PostgreSQL, responses sealed, statements unnamed',
  () => postgresStoreSubject({ postgres: { encryptionKeys: [`k1:${randomBytes(32).toString('base64')}`], preparedStatements: false, tableName: 'Contract Keys' } }),
  { parts },
);
