import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { ConfigError, loadConfig } from '../../src/config/config';
import { renderEnvExample, withVariablesTable } from '../../src/config/config.docs';
import { purgeCron } from '../../src/config/config.schema';
import { formatDuration, parseDuration } from '../../src/config/duration';
import { RETIRED_VARIABLES, variables } from '../../src/config/env.schema';
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

describe('loadConfig', () => {
  it('uses the documented defaults for an empty environment', () => {
    expect(loadConfig({})).toEqual({
      nodeEnv: 'development',
      production: false,
      port: 3000,
      logLevel: 'info',
      apiKeys: [],
      database: { url: undefined, embeddedDir: '.data/postgres', poolSize: 20, replicaUrls: [], preparedStatements: undefined, directUrl: undefined },
      redis: { url: undefined },
      idempotency: {
        lease: 30_000,
        retention: 86_400_000,
        postgres: { claimPoolSize: 10, encryptionKeys: [] },
        purge: { enabled: true, cron: '0 */10 * * * *' },
        outbox: { enabled: true },
        replayCache: { maxBytes: 16 * 1024 * 1024 },
        recovery: { enabled: true, interval: 60_000 },
      },
      cardNetwork: {
        url: undefined,
        apiKey: 'sk_test_simulator_0123456789abcdef',
        delayMs: 50,
        timeoutMs: 5_000,
        maxRetries: 2,
        webhookSecrets: ['whsec_simulator_0123456789abcdef'],
      },
      payments: { concurrency: 90, queueLimit: 1000 },
      bodyLimitBytes: 102_400,
      corsOrigins: [],
      http: { requestTimeoutMs: 30_000, keepAliveTimeoutMs: 72_000, trustProxy: [] },
      metrics: { token: undefined, port: undefined, host: '127.0.0.1' },
      rateLimit: { perClientPerSecond: 100, unauthenticatedPerMinute: 60 },
      confirmations: { perOrderPerDay: 3, perClientPerHour: 1000 },
    });
  });

  it('reads every variable, and derives what follows from them', () => {
    const k1 = Buffer.alloc(32, 1).toString('base64');
    const config = loadConfig({
      NODE_ENV: 'test',
      PORT: '8080',
      LOG_LEVEL: 'debug',
      API_KEYS: ` alice : ${SECRET_A} ,, bob:${SECRET_B}, `,
      DATABASE_URL: ' postgres://u:p@pgbouncer:6432/app ',
      DATABASE_POOL_SIZE: '7',
      DATABASE_REPLICA_URLS: 'postgres://u:p@replica-1:5432/app, postgresql://u:p@replica-2:5432/app',
      DATABASE_DIRECT_URL: 'postgres://u:p@db:5432/app',
      DATABASE_PREPARED_STATEMENTS: 'off',
      REDIS_URL: 'rediss://u:p@cache:6380/2',
      IDEMPOTENCY_LEASE: '2500ms',
      IDEMPOTENCY_RETENTION: '1h',
      IDEMPOTENCY_REPLAY_CACHE: '512kb',
      IDEMPOTENCY_ENCRYPTION_KEYS: ` k1:${k1} `,
      IDEMPOTENCY_JOBS: 'off',
      CARD_NETWORK_URL: 'https://api.stripe.com/',
      CARD_NETWORK_SECRET: 'sk_live_other_key_123',
      CARD_NETWORK_WEBHOOK_SECRET: ' whsec_first_0123456789 , whsec_second_0123456789,',
      CARD_NETWORK_TIMEOUT: '1s',
      CARD_NETWORK_MAX_RETRIES: '0',
      CARD_NETWORK_DELAY: '0',
      PAYMENTS_CONCURRENCY: '10',
      HTTP_BODY_LIMIT: '1mb',
      HTTP_CORS_ORIGINS: 'https://a.example, https://b.example',
      HTTP_TRUST_PROXY: '10.0.0.0/8, 192.168.1.7,::1,fd00::/8',
      HTTP_KEEP_ALIVE_TIMEOUT: '650s',
      METRICS_TOKEN: 'metrics-token-0123456789',
      METRICS_PORT: '9464',
      RATE_LIMIT_PER_CLIENT: '500',
      // Not the service's: ignored.
      HOME: '/root',
    });
    expect(config).toEqual({
      nodeEnv: 'test',
      production: false,
      port: 8080,
      logLevel: 'debug',
      apiKeys: [
        { name: 'alice', secret: SECRET_A },
        { name: 'bob', secret: SECRET_B },
      ],
      database: {
        url: 'postgres://u:p@pgbouncer:6432/app',
        embeddedDir: '.data/postgres',
        poolSize: 7,
        replicaUrls: ['postgres://u:p@replica-1:5432/app', 'postgresql://u:p@replica-2:5432/app'],
        preparedStatements: false,
        directUrl: 'postgres://u:p@db:5432/app',
      },
      redis: { url: 'rediss://u:p@cache:6380/2' },
      idempotency: {
        lease: 2500,
        retention: 3_600_000,
        postgres: { claimPoolSize: 4, encryptionKeys: [`k1:${k1}`] },
        purge: { enabled: false, cron: '*/20 * * * * *' },
        outbox: { enabled: false },
        replayCache: { maxBytes: 524_288 },
        recovery: { enabled: false, interval: 5000 },
      },
      cardNetwork: {
        url: 'https://api.stripe.com',
        apiKey: 'sk_live_other_key_123',
        delayMs: 0,
        timeoutMs: 1000,
        maxRetries: 0,
        webhookSecrets: ['whsec_first_0123456789', 'whsec_second_0123456789'],
      },
      payments: { concurrency: 10, queueLimit: 1000 },
      bodyLimitBytes: 1_048_576,
      corsOrigins: ['https://a.example', 'https://b.example'],
      http: { requestTimeoutMs: 30_000, keepAliveTimeoutMs: 650_000, trustProxy: ['10.0.0.0/8', '192.168.1.7', '::1', 'fd00::/8'] },
      metrics: { token: 'metrics-token-0123456789', port: 9464, host: '0.0.0.0' },
      rateLimit: { perClientPerSecond: 500, unauthenticatedPerMinute: 60 },
      confirmations: { perOrderPerDay: 3, perClientPerHour: 1000 },
    });
  });

  it('treats an empty or blank variable as unset (compose files pass VAR= empty)', () => {
    expect(loadConfig({ PORT: '', IDEMPOTENCY_RETENTION: ' ', DATABASE_URL: '  ', STRIPE_API_KEY: '' })).toEqual(loadConfig({}));
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

  it.each(['production', 'Production ', 'prod', 'staging', 'developement'])('gets the production rules with NODE_ENV=%j (fails closed)', (value) => {
    expect(loadConfig({ NODE_ENV: value })).toMatchObject({ production: true, nodeEnv: value.trim().toLowerCase() });
  });

  it.each(['development', 'test', ' Development'])('runs without the production rules with NODE_ENV=%j', (value) => {
    expect(loadConfig({ NODE_ENV: value }).production).toBe(false);
  });

  it('derives the database mode from DATABASE_DIRECT_URL and DATABASE_PREPARED_STATEMENTS', () => {
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
  });

  it('serves the metrics port on loopback unless a token guards it', () => {
    expect(loadConfig({ METRICS_PORT: '9464' }).metrics).toEqual({ token: undefined, port: 9464, host: '127.0.0.1' });
    expect(loadConfig({ METRICS_PORT: '9464', METRICS_TOKEN: 'metrics-token-0123456789' }).metrics.host).toBe('0.0.0.0');
  });

  it('gives the claims a pool half the size of the main pool', () => {
    expect(loadConfig({ DATABASE_POOL_SIZE: '1' }).idempotency.postgres.claimPoolSize).toBe(1);
    expect(loadConfig({ DATABASE_POOL_SIZE: '41' }).idempotency.postgres.claimPoolSize).toBe(21);
  });
});

describe('purgeCron', () => {
  it.each<[string, string]>([
    ['1s', '* * * * * *'],
    ['4s', '* * * * * *'],
    ['10m', '*/4 * * * * *'],
    ['1h', '*/20 * * * * *'],
    ['2h', '*/30 * * * * *'],
    ['3h', '0 * * * * *'],
    ['12h', '0 */5 * * * *'],
    ['24h', '0 */10 * * * *'],
    ['30d', '0 */10 * * * *'],
  ])('runs the purge of a %s retention at %j', (retention, cron) => {
    expect(purgeCron(parseDuration(retention))).toBe(cron);
  });

  it('runs at least 144 times a retention when it can, evenly, and never less often than every 10 minutes (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 400 * 86_400_000 }), (retentionMs) => {
        const cron = purgeCron(retentionMs);
        const fields = cron.split(' ');
        const every = (field: string) => (field === '*' ? 1 : Number(/^\*\/(\d+)$/.exec(field)![1]));
        const periodMs = fields[0] === '0' ? every(fields[1]) * 60_000 : every(fields[0]) * 1000;
        expect(fields[0] === '0' ? 60 % every(fields[1]) : 60 % every(fields[0])).toBe(0);
        expect(periodMs).toBeLessThanOrEqual(Math.max(1000, retentionMs / 144));
        expect(periodMs).toBeLessThanOrEqual(600_000);
      }),
    );
  });
});

describe('loadConfig errors', () => {
  it('throws a ConfigError with name, problems and a message listing them', () => {
    const error = configError({ PORT: 'abc' });
    expect(error.name).toBe('ConfigError');
    expect(error.problems).toEqual(['PORT: expected an integer between 0 and 65535']);
    expect(error.message).toBe('Invalid configuration:\n  - PORT: expected an integer between 0 and 65535');
  });

  it.each<[string, string, RegExp]>([
    ['PORT', '65536', /expected an integer between 0 and 65535/],
    ['PORT', '80.5', /expected an integer/],
    ['DATABASE_POOL_SIZE', '0', /expected an integer between 1 and 1000/],
    ['LOG_LEVEL', 'INFO', /"info"/],
    ['DATABASE_URL', 'mysql://x', /postgres:\/\/ or postgresql:\/\//],
    ['DATABASE_PREPARED_STATEMENTS', 'auto', /expected on or off/],
    ['IDEMPOTENCY_JOBS', 'yes', /expected on or off/],
    ['HTTP_BODY_LIMIT', '1.5mb', /invalid size/],
    ['HTTP_BODY_LIMIT', '0', /must be at least 1 byte/],
    ['IDEMPOTENCY_REPLAY_CACHE', 'lots', /invalid size "lots"/],
    ['IDEMPOTENCY_LEASE', 'forever', /invalid duration "forever"/],
    ['IDEMPOTENCY_LEASE', '0', /must be longer than 0/],
    ['CARD_NETWORK_TIMEOUT', '0ms', /must be longer than 0/],
    ['HTTP_KEEP_ALIVE_TIMEOUT', '0s', /must be longer than 0/],
    ['CARD_NETWORK_DELAY', '1.5s', /invalid duration/],
    ['CARD_NETWORK_URL', 'https://api.stripe.com/v1', /expected the API base/],
    ['CARD_NETWORK_SECRET', 'pk_test_abc', /expected a secret key/],
    ['CARD_NETWORK_MAX_RETRIES', '11', /between 0 and 10/],
    ['HTTP_TRUST_PROXY', '10.0.0.0/33', /IP addresses or CIDR ranges/],
    ['HTTP_TRUST_PROXY', 'loadbalancer.internal', /IP addresses or CIDR ranges/],
    ['METRICS_PORT', '0', /expected a port between 1 and 65535/],
    ['REDIS_URL', 'http://cache', /expected a redis:\/\/ or rediss:\/\/ URL/],
  ])('refuses %s=%j naming the variable', (name, value, reason) => {
    const problems = configError({ [name]: value }).problems;
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${name}: `));
    expect(problems[0]).toMatch(reason);
  });

  it('reports every bad value at once', () => {
    const error = configError({ PORT: 'abc', DATABASE_POOL_SIZE: '0', LOG_LEVEL: 'loud', HTTP_BODY_LIMIT: 'lots', IDEMPOTENCY_RETENTION: 'never' });
    const names = error.problems.map((p) => p.slice(0, p.indexOf(':')));
    expect(names.sort()).toEqual(['DATABASE_POOL_SIZE', 'HTTP_BODY_LIMIT', 'IDEMPOTENCY_RETENTION', 'LOG_LEVEL', 'PORT']);
  });

  it('refuses what needs another variable', () => {
    expect(configError({ DATABASE_REPLICA_URLS: 'postgres://u:p@r1/app' }).problems).toEqual(['DATABASE_REPLICA_URLS: needs DATABASE_URL (the primary they replicate)']);
    expect(configError({ DATABASE_DIRECT_URL: 'postgres://u:p@db/app' }).problems).toEqual(['DATABASE_DIRECT_URL: needs DATABASE_URL (the pooler in front of that server)']);
  });

  it('accepts a lease shorter than the retention and refuses the rest (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000_000 }), fc.integer({ min: 1, max: 10_000_000 }), (lease, retention) => {
        const env = { IDEMPOTENCY_LEASE: `${lease}ms`, IDEMPOTENCY_RETENTION: `${retention}ms` };
        if (lease < retention) expect(loadConfig(env).idempotency).toMatchObject({ lease, retention, recovery: { interval: 2 * lease } });
        else expect(configError(env).problems).toEqual(['IDEMPOTENCY_LEASE: must be shorter than IDEMPOTENCY_RETENTION']);
      }),
    );
  });

  describe('never echoes a secret', () => {
    it.each<[string, string, string]>([
      ['a short API key', 'API_KEYS', `a:${SECRET_A},b:short-secret15`],
      ['an API key entry without a name', 'API_KEYS', `:${SECRET_A}`],
      ['a replica URL that is not postgres', 'DATABASE_REPLICA_URLS', 'mysql://u:secret-password@r2/app'],
      ['a direct URL that is not postgres', 'DATABASE_DIRECT_URL', 'mysql://u:secret-password@db/app'],
      ['a Redis URL that is not redis', 'REDIS_URL', 'http://u:secret-password@cache'],
      ['a short metrics token', 'METRICS_TOKEN', 'short-secret'],
      ['a webhook secret list with a wrong entry', 'CARD_NETWORK_WEBHOOK_SECRET', 'whsec_first_0123456789,sk_live_not_a_webhook_secret'],
      ['a short encryption key', 'IDEMPOTENCY_ENCRYPTION_KEYS', `k3:${Buffer.alloc(16, 3).toString('base64')}`],
    ])('%s', (_case, name, value) => {
      const error = configError({ DATABASE_URL: 'postgres://u:p@db/app', [name]: value });
      expect(error.problems).toHaveLength(1);
      expect(error.problems[0]).toMatch(new RegExp(`^${name}: `));
      for (const part of value.split(/[,:@]/).filter((p) => p.length >= 8)) {
        expect(error.message).not.toContain(part);
        expect(String(error.stack)).not.toContain(part);
      }
    });

    it('never echoes the secret of a malformed API key (property)', () => {
      const secretChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!@#$%^&*');
      fc.assert(
        fc.property(fc.array(secretChar, { minLength: 8, maxLength: 15 }).map((c) => c.join('')), (secret) => {
          expect(configError({ API_KEYS: `ci:${secret}` }).message).not.toContain(secret);
        }),
      );
    });
  });

  it('refuses a client name given twice in API_KEYS', () => {
    expect(configError({ API_KEYS: 'a:0123456789abcdef,a:fedcba9876543210' }).problems).toEqual(['API_KEYS: the client name "a" appears twice']);
  });
});

describe('variables the service no longer reads', () => {
  it.each(Object.keys(RETIRED_VARIABLES))('%s stops the boot, saying what replaced it', (name) => {
    const error = configError({ [name]: 'x' });
    expect(error.problems[0]).toBe(`${name}: no longer read; ${RETIRED_VARIABLES[name]}`);
  });

  it.each<[string, string]>([
    ['STRIPE_API_KEY', 'CARD_NETWORK_SECRET'],
    ['STRIPE_WEBHOOK_SECRET', 'CARD_NETWORK_WEBHOOK_SECRET'],
    ['BODY_LIMIT', 'HTTP_BODY_LIMIT'],
    ['CORS_ORIGINS', 'HTTP_CORS_ORIGINS'],
    ['TRUST_PROXY', 'HTTP_TRUST_PROXY'],
    ['IDEMPOTENCY_PURGE_ENABLED', 'IDEMPOTENCY_JOBS'],
    ['RECOVERY_ENABLED', 'IDEMPOTENCY_JOBS'],
  ])('%s names its replacement, %s, a variable the service reads', (old, replacement) => {
    expect(Object.keys(variables.shape)).toContain(replacement);
    expect(configError({ [old]: 'sk_live_0123456789abcdef' }).problems).toEqual([expect.stringMatching(new RegExp(`^${old}: no longer read; .*set ${replacement}\\b`))]);
  });

  it('lists old names beside the bad values of current ones, and is never a current name', () => {
    expect(configError({ STRIPE_API_KEY: 'sk_test_0123456789abcdef', PORT: 'abc' }).problems).toEqual([
      'STRIPE_API_KEY: no longer read; renamed: set CARD_NETWORK_SECRET',
      'PORT: expected an integer between 0 and 65535',
    ]);
    for (const name of Object.keys(RETIRED_VARIABLES)) expect(Object.keys(variables.shape)).not.toContain(name);
  });
});

describe('the reference of the variables', () => {
  const ROOT = join(__dirname, '..', '..');
  const UPDATE = process.env.UPDATE_CONFIG_DOCS === '1';

  it('keeps the variables at 30 or fewer, each described', () => {
    const names = Object.keys(variables.shape);
    expect(names.length).toBeLessThanOrEqual(30);
    for (const schema of Object.values(variables.shape)) expect(schema.meta()?.description).toBeTruthy();
  });

  it.each([
    ['docs/configuration.md', (current: string) => withVariablesTable(current)],
    ['.env.example', () => renderEnvExample()],
  ])('%s is what the schema renders (npm run docs:config writes it)', (file, render) => {
    const path = join(ROOT, file);
    const rendered = render(readFileSync(path, 'utf8'));
    if (UPDATE) writeFileSync(path, rendered);
    expect(readFileSync(path, 'utf8')).toBe(rendered);
  });

  it('.env.example loads into the defaults, with its demo key', () => {
    const parsed = Object.fromEntries(
      renderEnvExample()
        .split('\n')
        .filter((line) => /^[A-Z_]+=/.test(line))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
    expect(loadConfig(parsed)).toEqual({ ...loadConfig({}), apiKeys: [{ name: 'demo', secret: 'sk_test_demo_0123456789abcdef' }] });
  });
});

describe('HTTP_TRUST_PROXY ranges that hold every IPv4 address (refused in production)', () => {
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
