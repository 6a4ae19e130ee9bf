import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { EffectCounter, httpEffects, sqlEffects } from './effects';
import { formatTable, runConformance } from './run';
import { parseHeader } from './target';

export const USAGE = `Usage: idempotency-conformance --base-url URL --route PATH --body JSON
       (--effects-url URL | --effects-sql SQL --database-url URL)
       [--client "Header: value" [--client "Header: value"]] [--method POST]
       [--concurrency 20] [--json FILE]

--body         the request body, with {{unique}} where a fresh value goes (one per check)
--effects-url  GET, {{unique}} filled in; answers a JSON count, an array or {"count": n}
--effects-sql  a query counting the effects of $1 (the unique value), first column of the first row
--client       the credentials of a client; a second one enables the scope check
Exit code: 0 when nothing failed, 1 when a check failed, 2 on a usage error.`;

interface Io {
  out(text: string): void;
  err(text: string): void;
}

function counterOf(values: { 'effects-url'?: string; 'effects-sql'?: string; 'database-url'?: string }): EffectCounter {
  const url = values['effects-url'];
  const sql = values['effects-sql'];
  if ((url === undefined) === (sql === undefined)) throw new Error('give one way to count effects: --effects-url or --effects-sql');
  if (url !== undefined) return httpEffects(url);
  const databaseUrl = values['database-url'];
  if (!databaseUrl) throw new Error('--effects-sql needs --database-url');
  return sqlEffects(sql!, databaseUrl);
}

/** The command line: returns the exit code. */
export async function main(argv: string[], io: Io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) }): Promise<number> {
  let effects: EffectCounter | undefined;
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        'base-url': { type: 'string' },
        route: { type: 'string' },
        method: { type: 'string', default: 'POST' },
        body: { type: 'string' },
        client: { type: 'string', multiple: true, default: [] },
        'effects-url': { type: 'string' },
        'effects-sql': { type: 'string' },
        'database-url': { type: 'string' },
        concurrency: { type: 'string', default: '20' },
        json: { type: 'string' },
        help: { type: 'boolean' },
      },
    });
    if (values.help) {
      io.out(`${USAGE}\n`);
      return 0;
    }
    const baseUrl = values['base-url'];
    if (!baseUrl || !values.route || !values.body) throw new Error('--base-url, --route and --body are required');
    if (values.client.length > 2) throw new Error('at most two --client');
    const concurrency = Number(values.concurrency);
    if (!Number.isInteger(concurrency) || concurrency < 2) throw new Error('--concurrency must be an integer of at least 2');
    const clients = values.client.map(parseHeader);
    effects = counterOf(values);
    const target = { baseUrl, route: values.route, method: values.method.toUpperCase(), bodyTemplate: values.body, clients };
    const report = await runConformance({ target, effects, concurrency });
    io.out(formatTable(report));
    if (values.json) await writeFile(values.json, `${JSON.stringify(report, null, 2)}\n`);
    return report.failed > 0 ? 1 : 0;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    io.err(`${message}\n\n${USAGE}\n`);
    return 2;
  } finally {
    await effects?.close();
  }
}
