import fc from 'fast-check';
import { ConfigError, loadConfig } from '../../src/config/config';
import { formatDuration, parseDuration } from '../../src/config/duration';
import { coversEveryIPv4 } from '../../src/config/production';
import { databaseMode } from '../../src/database/database-mode';

/** Runs loadConfig and returns the ConfigError it throws (fails the test if it does not throw one). */
function configError(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`expected loadConfig(${JSON.stringify(env)}) to throw a ConfigError`);
}

const SECRET_A = 'a-very-long-secret-value-0001';
const SECRET_B = 'another-long-secret-value-0002';

describe('parseDuration', () => {
  it.each<[string | number, number]>([
    ['500ms', 500],
    ['30s', 30_000],
    ['15m', 900_000],
    ['24h', 86_400_000],
    ['30d', 2_592_000_000],
    ['0', 0],
    ['0s', 0],
    ['1500', 1500],
    ['  30s  ', 30_000],
    ['007s', 7000],
    [0, 0],
    [250, 250],
    [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
    [String(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER],
  ])('parses %j as %d ms', (input, ms) => {
    expect(parseDuration(input)).toBe(ms);
  });

  it.each([
    '',
    '   ',
    'abc',
    's',
    '-1',
    '-5s',
    '1.5s',
    '1e3',
    '30 s',
    '30S',
    '30sec',
    '1w',
    '1y',
    '10us',
    '30s30s',
    '1h30m',
    '0x10',
    '+5s',
    '9007199254740992', // 2^53: not a safe integer
    '9007199254740991s', // safe count, unsafe milliseconds
    '999999999999999999999d',
  ])('rejects %j with a RangeError', (input) => {
    expect(() => parseDuration(input)).toThrow(RangeError);
  });

  it.each([-1, 1.5, NaN, Infinity, -Infinity, Number.MAX_SAFE_INTEGER + 1])('rejects the number %p', (input) => {
    expect(() => parseDuration(input)).toThrow(RangeError);
  });

  it('names the accepted forms and the bad value in the message', () => {
    expect(() => parseDuration('soon')).toThrow(/invalid duration "soon".*500ms, 30s, 15m, 24h or 30d/);
    expect(() => parseDuration('99999999999d')).toThrow(/too large/);
  });

  it('accepts every non-negative integer count with every unit while the result is a safe integer', () => {
    const units = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
    fc.assert(
      fc.property(fc.nat({ max: 1_000_000 }), fc.constantFrom(...(Object.keys(units) as (keyof typeof units)[])), (n, unit) => {
        expect(parseDuration(`${n}${unit}`)).toBe(n * units[unit]);
      }),
    );
  });
});

describe('formatDuration', () => {
  it.each<[number, string]>([
    [0, '0ms'],
    [1, '1ms'],
    [500, '500ms'],
    [1500, '1500ms'],
    [1000, '1s'],
    [30_000, '30s'],
    [90_000, '90s'],
    [60_000, '1m'],
    [900_000, '15m'],
    [5_400_000, '90m'],
    [3_600_000, '1h'],
    [86_400_000, '24h'],
    [259_200_000, '72h'],
    [604_800_000, '7d'],
    [2_592_000_000, '30d'],
    [129_600_000, '36h'],
  ])('formats %d ms as %j', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('round-trips through parseDuration for every non-negative safe integer', () => {
    fc.assert(
      fc.property(fc.oneof(fc.nat(), fc.maxSafeNat(), fc.nat({ max: 10_000 }).map((n) => n * 60_000)), (ms) => {
        expect(parseDuration(formatDuration(ms))).toBe(ms);
      }),
      { numRuns: 500 },
    );
  });
});

describe('loadConfig defaults', () => {
  const config = () => loadConfig({});

  it('treats an empty variable as unset (compose files pass VAR= empty)', () => {
    const config = loadConfig({ PORT: '', IDEMPOTENCY_RETENTION: ' ', LOG_LEVEL: '' });
    expect(config.port).toBe(3000);
    expect(config.idempotency.retentionMs).toBe(86_400_000);
    expect(config.logLevel).toBe('info');
  });

  it('reads IDEMPOTENCY_REPLAY_CACHE as a size, where 0 turns the cache off', () => {
    expect(loadConfig({ IDEMPOTENCY_REPLAY_CACHE: '512kb' }).idempotency.replayCacheBytes).toBe(524_288);
    expect(loadConfig({ IDEMPOTENCY_REPLAY_CACHE: '0' }).idempotency.replayCacheBytes).toBe(0);
  });

  it('refuses DATABASE_REPLICA_URLS that are not postgres URLs, or without DATABASE_URL, never echoing them', () => {
    const primary = 'postgres://u:p@db:5432/app';
    expect(() => loadConfig({ DATABASE_URL: primary, DATABASE_REPLICA_URLS: 'postgres://u:p@r1/app,mysql://u:secret@r2/app' })).toThrow(
      /DATABASE_REPLICA_URLS: expected a comma-separated list of postgres/,
    );
    expect(() => loadConfig({ DATABASE_URL: primary, DATABASE_REPLICA_URLS: 'mysql://u:secret@r2/app' })).not.toThrow(/secret/);
    expect(() => loadConfig({ DATABASE_REPLICA_URLS: 'postgres://u:p@r1/app' })).toThrow(/DATABASE_REPLICA_URLS: needs DATABASE_URL/);
    expect(loadConfig({ DATABASE_URL: primary, DATABASE_REPLICA_URLS: ' , ' }).database.replicaUrls).toEqual([]);
  });

  it('reads the transaction pooler settings, and derives the database mode from them', () => {
    const pooler = 'postgres://u:p@pgbouncer:6432/app';
    const direct = 'postgres://u:p@db:5432/app';
    const mode = (env: NodeJS.ProcessEnv) => databaseMode(loadConfig(env).database);
    expect(mode({ DATABASE_URL: direct })).toEqual({ transactionPooler: false, preparedStatements: true, directUrl: undefined });
    expect(mode({ DATABASE_URL: pooler, DATABASE_PREPARED_STATEMENTS: 'off' })).toEqual({ transactionPooler: true, preparedStatements: false, directUrl: undefined });
    // A declared pooler gets unnamed statements unless the operator says it keeps them.
    expect(mode({ DATABASE_URL: pooler, DATABASE_DIRECT_URL: direct })).toEqual({ transactionPooler: true, preparedStatements: false, directUrl: direct });
    expect(mode({ DATABASE_URL: pooler, DATABASE_DIRECT_URL: direct, DATABASE_PREPARED_STATEMENTS: 'on' })).toEqual({
      transactionPooler: true,
      preparedStatements: true,
      directUrl: direct,
    });
    for (const [value, on] of [['on', true], ['OFF', false], ['true', true], ['0', false], ['', undefined], [undefined, undefined]] as const) {
      expect(loadConfig({ DATABASE_PREPARED_STATEMENTS: value }).database.preparedStatements).toBe(on);
    }
    expect(() => loadConfig({ DATABASE_PREPARED_STATEMENTS: 'auto' })).toThrow(/DATABASE_PREPARED_STATEMENTS: expected on or off/);
    expect(() => loadConfig({ DATABASE_DIRECT_URL: direct })).toThrow(/DATABASE_DIRECT_URL: needs DATABASE_URL/);
    expect(() => loadConfig({ DATABASE_URL: pooler, DATABASE_DIRECT_URL: 'mysql://u:secret@db/app' })).toThrow(/DATABASE_DIRECT_URL: expected a postgres/);
    expect(() => loadConfig({ DATABASE_URL: pooler, DATABASE_DIRECT_URL: 'mysql://u:secret@db/app' })).not.toThrow(/secret/);
  });

  it('takes REDIS_URL as a redis:// or rediss:// URL, refusing others without echoing them', () => {
    expect(loadConfig({ REDIS_URL: 'redis://u:p@cache:6379/2' }).redis.url).toBe('redis://u:p@cache:6379/2');
    expect(loadConfig({ REDIS_URL: '' }).redis.url).toBeUndefined();
    expect(() => loadConfig({ REDIS_URL: 'http://u:secret@cache' })).toThrow(/REDIS_URL: expected a redis:\/\/ or rediss:\/\/ URL/);
    expect(() => loadConfig({ REDIS_URL: 'http://u:secret@cache' })).not.toThrow(/secret/);
  });

  it('refuses a zero BODY_LIMIT and a client name given twice in API_KEYS', () => {
    expect(() => loadConfig({ BODY_LIMIT: '0' })).toThrow(/BODY_LIMIT/);
    expect(() => loadConfig({ API_KEYS: 'a:0123456789abcdef,a:fedcba9876543210' })).toThrow(/API_KEYS: the client name "a" appears twice/);
  });

  it('uses the documented defaults for an empty environment', () => {
    expect(config()).toEqual({
      nodeEnv: 'development',
      production: false,
      port: 3000,
      database: {
        url: undefined,
        embeddedDir: '.data/postgres',
        embeddedPort: undefined,
        poolSize: 20,
        replicaUrls: [],
        preparedStatements: undefined,
        directUrl: undefined,
      },
      apiKeys: [],
      bodyLimitBytes: 102_400,
      logLevel: 'info',
      corsOrigins: [],
      idempotency: {
        leaseMs: 30_000,
        retentionMs: 86_400_000,
        claimPoolSize: 10,
        commit: 'durable',
        purge: { enabled: true, cron: '0 */10 * * * *', batchSize: 5000, budgetMs: 60_000 },
        replayCacheBytes: 16 * 1024 * 1024,
        encryptionKeys: [],
      },
      cardNetwork: {
        url: undefined,
        apiKey: 'sk_test_simulator_0123456789abcdef',
        delayMs: 50,
        timeoutMs: 5_000,
        maxRetries: 2,
        webhookSecrets: ['whsec_simulator_0123456789abcdef'],
        webhookEventRetentionMs: 604_800_000,
      },
      recovery: { enabled: true, intervalMs: 60_000 },
      redis: { url: undefined },
      payments: { concurrency: 90, queueLimit: 1000, perClient: 30 },
      http: { requestTimeoutMs: 30_000, keepAliveTimeoutMs: 72_000, trustProxy: [] },
      metrics: { token: undefined, port: undefined, host: '127.0.0.1' },
      rateLimit: { perClientPerSecond: 100, unauthenticatedPerMinute: 60 },
      confirmations: { perOrderPerDay: 3, perClientPerHour: 1000 },
    });
  });

  it('reads the metrics settings and never echoes a bad token', () => {
    expect(loadConfig({ METRICS_TOKEN: 'metrics-token-0123456789', METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' }).metrics).toEqual({
      token: 'metrics-token-0123456789',
      port: 9464,
      host: '0.0.0.0',
    });
    expect(() => loadConfig({ METRICS_TOKEN: 'short-secret' })).toThrow(/METRICS_TOKEN: expected at least 16/);
    expect(() => loadConfig({ METRICS_TOKEN: 'short-secret' })).not.toThrow(/short-secret/);
  });

  it.each([
    ['CARD_NETWORK_URL', 'ftp://x', 'CARD_NETWORK_URL'],
    ['CARD_NETWORK_URL', 'https://api.stripe.com/v1', 'CARD_NETWORK_URL'],
    ['STRIPE_API_KEY', 'pk_test_abc', 'STRIPE_API_KEY'],
    ['CARD_NETWORK_TIMEOUT', '0ms', 'CARD_NETWORK_TIMEOUT'],
    ['CARD_NETWORK_MAX_RETRIES', '11', 'CARD_NETWORK_MAX_RETRIES'],
    ['RECOVERY_INTERVAL', '0s', 'RECOVERY_INTERVAL'],
  ])('refuses %s=%s', (name, value, path) => {
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`${path}: `));
  });

  it('reads the encryption key ring, newest first, and refuses a bad key without echoing it', () => {
    const k2 = Buffer.alloc(32, 2).toString('base64');
    const k1 = Buffer.alloc(32, 1).toString('base64');
    expect(loadConfig({ IDEMPOTENCY_ENCRYPTION_KEYS: ` k2:${k2}, k1:${k1} ` }).idempotency.encryptionKeys).toEqual([`k2:${k2}`, `k1:${k1}`]);
    const short = Buffer.alloc(16, 3).toString('base64');
    let message = '';
    try {
      loadConfig({ IDEMPOTENCY_ENCRYPTION_KEYS: `k3:${short}` });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/IDEMPOTENCY_ENCRYPTION_KEYS: the encryption key "k3" must be 32 bytes/);
    expect(message).not.toContain(short);
    expect(() => loadConfig({ IDEMPOTENCY_ENCRYPTION_KEYS: `k1:${k1},k1:${k2}` })).toThrow(/appears twice/);
  });

  it('accepts card network calls longer than the lease: the lease is renewed while a request works', () => {
    const c = loadConfig({ CARD_NETWORK_TIMEOUT: '10s', CARD_NETWORK_MAX_RETRIES: '2', IDEMPOTENCY_LEASE: '5s' });
    expect(c.idempotency.leaseMs).toBe(5_000);
    expect(c.cardNetwork.timeoutMs).toBe(10_000);
  });

  it.each([
    ['STRIPE_WEBHOOK_SECRET', 'sk_test_not_a_webhook_secret'],
    ['WEBHOOK_EVENT_RETENTION', '0s'],
  ])('refuses %s=%s', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`${name}: `));
  });

  it('reads STRIPE_WEBHOOK_SECRET as a comma-separated list, refusing a bad entry without echoing any', () => {
    expect(loadConfig({ STRIPE_WEBHOOK_SECRET: ' whsec_first_0123456789 , whsec_second_0123456789,' }).cardNetwork.webhookSecrets).toEqual([
      'whsec_first_0123456789',
      'whsec_second_0123456789',
    ]);
    const error = configError({ STRIPE_WEBHOOK_SECRET: 'whsec_first_0123456789,sk_live_not_a_webhook_secret' });
    expect(error.problems).toEqual(['STRIPE_WEBHOOK_SECRET: expected webhook signing secrets whsec_..., separated by commas']);
    expect(error.message).not.toContain('whsec_first_0123456789');
    expect(error.message).not.toContain('sk_live_not_a_webhook_secret');
    expect(configError({ STRIPE_WEBHOOK_SECRET: ' , ' }).problems).toEqual(['STRIPE_WEBHOOK_SECRET: expected webhook signing secrets whsec_..., separated by commas']);
  });

  it('reads the HTTP settings', () => {
    const c = loadConfig({ HTTP_REQUEST_TIMEOUT: '10s', HTTP_KEEP_ALIVE_TIMEOUT: '65s', TRUST_PROXY: '10.0.0.0/8, 192.168.1.7,::1,fd00::/8' });
    expect(c.http).toEqual({ requestTimeoutMs: 10_000, keepAliveTimeoutMs: 65_000, trustProxy: ['10.0.0.0/8', '192.168.1.7', '::1', 'fd00::/8'] });
  });

  it.each([
    ['TRUST_PROXY', 'loadbalancer.internal'],
    ['TRUST_PROXY', '10.0.0.0/33'],
    ['TRUST_PROXY', '10.0.0.1/8/8'],
    ['HTTP_REQUEST_TIMEOUT', '0s'],
    ['PAYMENTS_CONCURRENCY_PER_CLIENT', '91'],
  ])('refuses %s=%s', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`${name}: `));
  });

  it('reads the card network and recovery settings', () => {
    const c = loadConfig({
      CARD_NETWORK_URL: 'https://api.stripe.com/',
      STRIPE_API_KEY: 'sk_test_abc123',
      CARD_NETWORK_TIMEOUT: '2s',
      CARD_NETWORK_MAX_RETRIES: '0',
      RECOVERY_ENABLED: 'false',
      RECOVERY_INTERVAL: '10s',
    });
    expect(c.cardNetwork).toMatchObject({ url: 'https://api.stripe.com', apiKey: 'sk_test_abc123', timeoutMs: 2_000, maxRetries: 0 });
    expect(c.recovery).toEqual({ enabled: false, intervalMs: 10_000 });
  });

  it.each<[string, (c: ReturnType<typeof loadConfig>) => unknown, unknown]>([
    ['port 3000', (c) => c.port, 3000],
    ['pool size 20', (c) => c.database.poolSize, 20],
    ['body limit 100kb', (c) => c.bodyLimitBytes, 102_400],
    ['log level info', (c) => c.logLevel, 'info'],
    ['lease 30s', (c) => c.idempotency.leaseMs, 30_000],
    ['retention 24h', (c) => c.idempotency.retentionMs, 86_400_000],
    ['purge every 10 minutes', (c) => c.idempotency.purge.cron, '0 */10 * * * *'],
  ])('defaults to %s', (_name, pick, value) => {
    expect(pick(config())).toEqual(value);
  });

  it('ignores unrelated environment variables', () => {
    expect(loadConfig({ HOME: '/root', PATH: '/bin', NODE_ENV: 'test' })).toEqual({ ...config(), nodeEnv: 'test' });
  });

  it.each(['production', 'Production ', 'prod', 'staging', 'preprod', 'developement'])('gets the production rules with NODE_ENV=%j (fails closed)', (value) => {
    expect(loadConfig({ NODE_ENV: value })).toMatchObject({ production: true, nodeEnv: value.trim().toLowerCase() });
  });

  it.each([['development'], ['test'], [' Development'], ['']])('runs without the production rules with NODE_ENV=%j (empty: the default, development)', (value) => {
    expect(loadConfig({ NODE_ENV: value }).production).toBe(false);
  });

  it('reads process.env when no environment is passed', () => {
    const saved = process.env.PORT;
    process.env.PORT = '4321';
    try {
      expect(loadConfig().port).toBe(4321);
    } finally {
      if (saved === undefined) delete process.env.PORT;
      else process.env.PORT = saved;
    }
  });
});

describe('loadConfig values', () => {
  it('reads every variable', () => {
    const config = loadConfig({
      PORT: '8080',
      DATABASE_URL: 'postgres://u:p@db:5432/app',
      EMBEDDED_PG_DIR: '/tmp/pg',
      EMBEDDED_PG_PORT: '5433',
      DATABASE_POOL_SIZE: '50',
      DATABASE_REPLICA_URLS: 'postgres://u:p@replica-1:5432/app, postgresql://u:p@replica-2:5432/app',
      DATABASE_PREPARED_STATEMENTS: 'off',
      DATABASE_DIRECT_URL: 'postgres://u:p@db-direct:5432/app',
      API_KEYS: `alice:${SECRET_A},bob:${SECRET_B}`,
      BODY_LIMIT: '1mb',
      LOG_LEVEL: 'debug',
      CORS_ORIGINS: 'https://a.example,https://b.example',
      IDEMPOTENCY_LEASE: '2500ms',
      IDEMPOTENCY_RETENTION: '30d',
      IDEMPOTENCY_CLAIM_POOL_SIZE: '4',
      IDEMPOTENCY_COMMIT: 'one',
      IDEMPOTENCY_PURGE_ENABLED: 'false',
      IDEMPOTENCY_PURGE_CRON: '*/5 * * * *',
      IDEMPOTENCY_PURGE_BATCH: '100',
      IDEMPOTENCY_PURGE_BUDGET: '5s',
      IDEMPOTENCY_REPLAY_CACHE: '0',
      CARD_NETWORK_DELAY: '0',
      CARD_NETWORK_URL: 'http://127.0.0.1:4242',
      STRIPE_API_KEY: 'sk_test_other_key_123',
      CARD_NETWORK_TIMEOUT: '1s',
      CARD_NETWORK_MAX_RETRIES: '1',
      STRIPE_WEBHOOK_SECRET: 'whsec_other_secret_123',
      WEBHOOK_EVENT_RETENTION: '3d',
      RECOVERY_ENABLED: 'false',
      RECOVERY_INTERVAL: '5s',
      METRICS_TOKEN: 'metrics-token-0123456789',
      METRICS_PORT: '9464',
      METRICS_HOST: '0.0.0.0',
      RATE_LIMIT_PER_CLIENT: '500',
      RATE_LIMIT_UNAUTHENTICATED: '10',
      CONFIRMATIONS_PER_ORDER_PER_DAY: '5',
      CONFIRMATIONS_PER_CLIENT_PER_HOUR: '200',
    });
    expect(config).toEqual({
      nodeEnv: 'development',
      production: false,
      port: 8080,
      database: {
        url: 'postgres://u:p@db:5432/app',
        embeddedDir: '/tmp/pg',
        embeddedPort: 5433,
        poolSize: 50,
        replicaUrls: ['postgres://u:p@replica-1:5432/app', 'postgresql://u:p@replica-2:5432/app'],
        preparedStatements: false,
        directUrl: 'postgres://u:p@db-direct:5432/app',
      },
      apiKeys: [
        { name: 'alice', secret: SECRET_A },
        { name: 'bob', secret: SECRET_B },
      ],
      bodyLimitBytes: 1_048_576,
      logLevel: 'debug',
      corsOrigins: ['https://a.example', 'https://b.example'],
      idempotency: {
        leaseMs: 2500,
        retentionMs: 2_592_000_000,
        claimPoolSize: 4,
        commit: 'one',
        purge: { enabled: false, cron: '*/5 * * * *', batchSize: 100, budgetMs: 5000 },
        replayCacheBytes: 0,
        encryptionKeys: [],
      },
      cardNetwork: {
        url: 'http://127.0.0.1:4242',
        apiKey: 'sk_test_other_key_123',
        delayMs: 0,
        timeoutMs: 1000,
        maxRetries: 1,
        webhookSecrets: ['whsec_other_secret_123'],
        webhookEventRetentionMs: 259_200_000,
      },
      recovery: { enabled: false, intervalMs: 5000 },
      redis: { url: undefined },
      payments: { concurrency: 90, queueLimit: 1000, perClient: 30 },
      http: { requestTimeoutMs: 30_000, keepAliveTimeoutMs: 72_000, trustProxy: [] },
      metrics: { token: 'metrics-token-0123456789', port: 9464, host: '0.0.0.0' },
      rateLimit: { perClientPerSecond: 500, unauthenticatedPerMinute: 10 },
      confirmations: { perOrderPerDay: 5, perClientPerHour: 200 },
    });
  });

  it.each<[string, number]>([
    ['500ms', 500],
    ['30s', 30_000],
    ['15m', 900_000],
    ['24h', 86_400_000],
    ['30d', 2_592_000_000],
    ['1500', 1500],
  ])('reads the duration %j as %d ms', (text, ms) => {
    expect(loadConfig({ IDEMPOTENCY_PURGE_BUDGET: text }).idempotency.purge.budgetMs).toBe(ms);
    expect(loadConfig({ CARD_NETWORK_DELAY: text }).cardNetwork.delayMs).toBe(ms);
    const shortLease = { IDEMPOTENCY_LEASE: '400ms', CARD_NETWORK_TIMEOUT: '100ms', CARD_NETWORK_MAX_RETRIES: '0' };
    expect(loadConfig({ IDEMPOTENCY_RETENTION: text, ...shortLease }).idempotency.retentionMs).toBe(ms);
  });

  it('reads a lease just shorter than the retention', () => {
    const config = loadConfig({ IDEMPOTENCY_LEASE: '59s', IDEMPOTENCY_RETENTION: '1m' });
    expect(config.idempotency).toMatchObject({ leaseMs: 59_000, retentionMs: 60_000 });
  });

  it.each<[string, number]>([
    ['0', 0],
    ['1', 1],
    ['65535', 65535],
    [' 8080 ', 8080],
  ])('accepts PORT=%j', (value, port) => {
    expect(loadConfig({ PORT: value }).port).toBe(port);
  });

  it.each<[string, number]>([
    ['512', 512],
    ['512b', 512],
    ['100kb', 102_400],
    ['100KB', 102_400],
    ['1mb', 1_048_576],
    ['2 MB', 2_097_152],
    [' 1kb ', 1024],
  ])('reads BODY_LIMIT=%j as %d bytes', (value, bytes) => {
    expect(loadConfig({ BODY_LIMIT: value }).bodyLimitBytes).toBe(bytes);
  });

  it.each(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])('accepts LOG_LEVEL=%s', (level) => {
    expect(loadConfig({ LOG_LEVEL: level }).logLevel).toBe(level);
  });

  it.each([
    ['postgres://localhost/app'],
    ['postgresql://user:pw@host:5432/db?sslmode=require'],
  ])('accepts DATABASE_URL=%s', (url) => {
    expect(loadConfig({ DATABASE_URL: url }).database.url).toBe(url);
  });

  it('treats an empty or blank DATABASE_URL as unset (embedded PostgreSQL) and trims it', () => {
    expect(loadConfig({ DATABASE_URL: '' }).database.url).toBeUndefined();
    expect(loadConfig({ DATABASE_URL: '   ' }).database.url).toBeUndefined();
    expect(loadConfig({ DATABASE_URL: ' postgres://h/db ' }).database.url).toBe('postgres://h/db');
  });

  it.each<[string, boolean]>([
    ['true', true],
    ['TRUE', true],
    ['1', true],
    ['false', false],
    ['False', false],
    ['0', false],
    [' false ', false],
  ])('reads IDEMPOTENCY_PURGE_ENABLED=%j as %p', (value, enabled) => {
    expect(loadConfig({ IDEMPOTENCY_PURGE_ENABLED: value }).idempotency.purge.enabled).toBe(enabled);
  });

  it('accepts 5-field and 6-field cron expressions', () => {
    expect(loadConfig({ IDEMPOTENCY_PURGE_CRON: '*/5 * * * *' }).idempotency.purge.cron).toBe('*/5 * * * *');
    expect(loadConfig({ IDEMPOTENCY_PURGE_CRON: '30 */5 * * * *' }).idempotency.purge.cron).toBe('30 */5 * * * *');
  });

  describe('API_KEYS', () => {
    it('parses name:secret pairs separated by commas, trimming spaces and skipping empty entries', () => {
      expect(loadConfig({ API_KEYS: ` a : ${SECRET_A} ,, b:${SECRET_B}, ` }).apiKeys).toEqual([
        { name: 'a', secret: SECRET_A },
        { name: 'b', secret: SECRET_B },
      ]);
    });

    it('keeps colons after the first one in the secret', () => {
      expect(loadConfig({ API_KEYS: 'svc:abc:def:ghi:jkl:mnop' }).apiKeys).toEqual([{ name: 'svc', secret: 'abc:def:ghi:jkl:mnop' }]);
    });

    it('accepts a secret of exactly 16 characters', () => {
      expect(loadConfig({ API_KEYS: 'a:0123456789abcdef' }).apiKeys).toEqual([{ name: 'a', secret: '0123456789abcdef' }]);
    });

    it('is empty when unset or blank', () => {
      expect(loadConfig({}).apiKeys).toEqual([]);
      expect(loadConfig({ API_KEYS: '' }).apiKeys).toEqual([]);
      expect(loadConfig({ API_KEYS: ' , ' }).apiKeys).toEqual([]);
    });

    it.each([
      ['a secret shorter than 16 characters', `a:${SECRET_A},b:short-secret15`, 'short-secret15', 2],
      ['an entry without a colon', `${SECRET_A}`, SECRET_A, 1],
      ['an entry with an empty name', `:${SECRET_A}`, SECRET_A, 1],
      ['an entry with a blank name', `  :${SECRET_A}`, SECRET_A, 1],
      ['an entry with no secret', `a:${SECRET_A},b:`, SECRET_A, 2],
      ['a malformed second entry', `a:${SECRET_A},${SECRET_B}`, SECRET_B, 2],
    ])('refuses %s without echoing any secret', (_name, value, secret, entry) => {
      const error = configError({ API_KEYS: value });
      expect(error.message).toContain('API_KEYS');
      expect(error.message).toContain(`entry ${entry}`);
      expect(error.message).not.toContain(secret);
      expect(error.message).not.toContain(SECRET_A);
      expect(error.message).not.toContain(SECRET_B);
      expect(error.problems.join('\n')).not.toContain(secret);
      expect(JSON.stringify(error)).not.toContain(secret);
      expect(String(error.stack)).not.toContain(secret);
    });

    it('never echoes the secret of a malformed entry (property)', () => {
      const secretChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!@#$%^&*');
      const shortSecret = fc.array(secretChar, { minLength: 8, maxLength: 15 }).map((c) => c.join(''));
      fc.assert(
        fc.property(shortSecret, (secret) => {
          const error = configError({ API_KEYS: `ci:${secret}` });
          expect(error.message).not.toContain(secret);
        }),
      );
    });
  });

  describe('CORS_ORIGINS', () => {
    it.each<[string, string[]]>([
      ['', []],
      ['https://a.example', ['https://a.example']],
      ['https://a.example,https://b.example', ['https://a.example', 'https://b.example']],
      [' https://a.example , https://b.example ,', ['https://a.example', 'https://b.example']],
      [',,', []],
    ])('splits %j into %j', (value, origins) => {
      expect(loadConfig({ CORS_ORIGINS: value }).corsOrigins).toEqual(origins);
    });
  });

  describe('EMBEDDED_PG_PORT', () => {
    it('is optional', () => {
      expect(loadConfig({}).database.embeddedPort).toBeUndefined();
      expect(loadConfig({ EMBEDDED_PG_PORT: '' }).database.embeddedPort).toBeUndefined();
      expect(loadConfig({ EMBEDDED_PG_PORT: '  ' }).database.embeddedPort).toBeUndefined();
    });

    it.each<[string, number]>([
      ['1', 1],
      ['5433', 5433],
      [' 5433 ', 5433],
      ['65535', 65535],
    ])('reads %j as %d', (value, port) => {
      expect(loadConfig({ EMBEDDED_PG_PORT: value }).database.embeddedPort).toBe(port);
    });

    it.each(['0', '65536', 'abc', '-1', '54.33'])('refuses %j naming the variable', (value) => {
      expect(configError({ EMBEDDED_PG_PORT: value }).message).toMatch(/EMBEDDED_PG_PORT: expected a port between 1 and 65535/);
    });
  });
});

describe('loadConfig errors', () => {
  it('throws a ConfigError with name, problems and a message listing them', () => {
    const error = configError({ PORT: 'abc' });
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('ConfigError');
    expect(error.problems).toHaveLength(1);
    expect(error.problems[0]).toMatch(/^PORT: /);
    expect(error.message).toBe(`Invalid configuration:\n  - ${error.problems[0]}`);
  });

  it.each<[string, string, RegExp]>([
    ['PORT', 'abc', /expected an integer between 0 and 65535/],
    ['PORT', '65536', /expected an integer between 0 and 65535/],
    ['PORT', '-1', /expected an integer/],
    ['PORT', '80.5', /expected an integer/],
    ['PORT', '1e3', /expected an integer/],
    ['DATABASE_POOL_SIZE', '0', /expected an integer between 1 and 1000/],
    ['DATABASE_POOL_SIZE', '1001', /expected an integer between 1 and 1000/],
    ['DATABASE_POOL_SIZE', 'many', /expected an integer/],
    ['IDEMPOTENCY_CLAIM_POOL_SIZE', '0', /between 1 and 1000/],
    ['IDEMPOTENCY_COMMIT', 'twice', /"durable"\|"one"/],
    ['IDEMPOTENCY_PURGE_BATCH', '0', /between 1 and 1000000/],
    ['IDEMPOTENCY_PURGE_BATCH', '1000001', /between 1 and 1000000/],
    ['LOG_LEVEL', 'loud', /"info"/],
    ['LOG_LEVEL', 'INFO', /"info"/],
    ['DATABASE_URL', 'mysql://x', /postgres:\/\/ or postgresql:\/\//],
    ['DATABASE_URL', 'localhost:5432', /postgres/],
    ['BODY_LIMIT', 'lots', /invalid size "lots"/],
    ['BODY_LIMIT', '1gb', /invalid size/],
    ['BODY_LIMIT', '1.5mb', /invalid size/],
    ['BODY_LIMIT', '-1kb', /invalid size/],
    ['IDEMPOTENCY_REPLAY_CACHE', 'lots', /invalid size "lots"/],
    ['IDEMPOTENCY_LEASE', 'forever', /invalid duration "forever"/],
    ['IDEMPOTENCY_LEASE', '0', /must be longer than 0/],
    ['IDEMPOTENCY_RETENTION', '1 day', /invalid duration/],
    ['IDEMPOTENCY_PURGE_BUDGET', '-5s', /invalid duration/],
    ['CARD_NETWORK_DELAY', '1.5s', /invalid duration/],
    ['IDEMPOTENCY_PURGE_ENABLED', 'yes', /expected true or false/],
    ['IDEMPOTENCY_PURGE_CRON', '* * * *', /cron expression/],
    ['IDEMPOTENCY_PURGE_CRON', '* * * * * * *', /cron expression/],
  ])('refuses %s=%j naming the variable', (name, value, reason) => {
    const error = configError({ [name]: value });
    expect(error.message).toContain(name);
    const problem = error.problems.find((p) => p.startsWith(`${name}: `));
    expect(problem).toBeDefined();
    expect(problem).toMatch(reason);
  });

  it('reports every bad value at once', () => {
    const error = configError({
      PORT: 'abc',
      DATABASE_POOL_SIZE: '0',
      LOG_LEVEL: 'loud',
      DATABASE_URL: 'mysql://x',
      BODY_LIMIT: 'lots',
      IDEMPOTENCY_RETENTION: 'never',
    });
    const names = error.problems.map((p) => p.slice(0, p.indexOf(':')));
    expect(names.sort()).toEqual(['BODY_LIMIT', 'DATABASE_POOL_SIZE', 'DATABASE_URL', 'IDEMPOTENCY_RETENTION', 'LOG_LEVEL', 'PORT']);
    for (const name of names) expect(error.message).toContain(`  - ${name}: `);
  });

  it('reports a lease/retention conflict together with other bad values', () => {
    const error = configError({ PORT: 'abc', IDEMPOTENCY_LEASE: '25h' });
    expect(error.problems).toEqual([
      'PORT: expected an integer between 0 and 65535',
      'IDEMPOTENCY_LEASE: must be shorter than IDEMPOTENCY_RETENTION',
    ]);
  });

  it.each<[string, string]>([
    ['24h', '24h'],
    ['30s', '30s'],
    ['2d', '1d'],
    ['86400001', '24h'],
  ])('refuses IDEMPOTENCY_LEASE=%s with IDEMPOTENCY_RETENTION=%s (lease not shorter than retention)', (lease, retention) => {
    const error = configError({ IDEMPOTENCY_LEASE: lease, IDEMPOTENCY_RETENTION: retention });
    expect(error.problems).toEqual(['IDEMPOTENCY_LEASE: must be shorter than IDEMPOTENCY_RETENTION']);
  });

  it('refuses a lease longer than the default retention when only the lease is set', () => {
    expect(configError({ IDEMPOTENCY_LEASE: '25h' }).problems).toEqual([
      'IDEMPOTENCY_LEASE: must be shorter than IDEMPOTENCY_RETENTION',
    ]);
  });

  it('refuses a retention not longer than the default lease when only the retention is set', () => {
    expect(configError({ IDEMPOTENCY_RETENTION: '30s' }).problems).toEqual([
      'IDEMPOTENCY_LEASE: must be shorter than IDEMPOTENCY_RETENTION',
    ]);
  });

  it('accepts a lease shorter than the retention and refuses the rest (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 10_000_000 }), fc.integer({ min: 1, max: 10_000_000 }), (lease, retention) => {
        // The shortest network call, so that only the lease against the retention is in question.
        const env = { IDEMPOTENCY_LEASE: `${lease}ms`, IDEMPOTENCY_RETENTION: `${retention}ms`, CARD_NETWORK_TIMEOUT: '1ms', CARD_NETWORK_MAX_RETRIES: '0' };
        if (lease < retention) {
          expect(loadConfig(env).idempotency).toMatchObject({ leaseMs: lease, retentionMs: retention });
        } else {
          expect(configError(env).message).toContain('IDEMPOTENCY_LEASE');
        }
      }),
    );
  });
});

describe('TRUST_PROXY ranges that hold every IPv4 address (refused in production)', () => {
  it.each([
    [['::ffff:0:0/96']],
    [['::ffff:0.0.0.0/96']],
    [['::FFFF:0:0/96']],
    [['::/64']],
    [['::ffff:0:0/95']],
    [['0.0.0.0/1', '128.0.0.0/1']],
    [['::ffff:0:0/97', '::ffff:128.0.0.0/97']],
    [['0.0.0.0/1', '::ffff:128.0.0.0/97']],
    [['10.0.0.0/8', '0.0.0.0/0']],
  ])('%j holds them all', (entries) => {
    expect(coversEveryIPv4(entries)).toBe(true);
  });

  it.each([[['10.0.0.0/8', '192.168.0.0/16']], [['::ffff:0:0/97']], [['fd00::/8', '::1']], [['::/96']], [['0.0.0.0/1', '128.0.0.0/2']], [[]]])(
    '%j does not',
    (entries) => {
      expect(coversEveryIPv4(entries)).toBe(false);
    },
  );
});
