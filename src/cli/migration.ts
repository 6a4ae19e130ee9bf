import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { DataSource } from 'typeorm';
import { runWithAppContext } from './with-app-context';

/**
 * `npm run migration:run` applies pending migrations (the app also does so on
 * boot, under the same advisory lock). `npm run migration:generate -- Name`
 * compares the entities with the migrated database and writes
 * migrations/<timestamp>-Name.ts with the difference, to review and add to
 * migrations/index.ts.
 */
const [command, name] = process.argv.slice(2);

if (command !== 'run' && command !== 'generate') {
  console.error('usage: migration run | migration generate <Name>');
  process.exit(2);
}
if (command === 'generate' && !/^[A-Z][A-Za-z0-9]*$/.test(name ?? '')) {
  console.error('usage: npm run migration:generate -- <PascalCaseName>');
  process.exit(2);
}

const quote = (sql: string) => '`' + sql.replace(/\\/g, '\\\\').replace(/`/g, '\\`').replace(/\$\{/g, '\\${') + '`';

runWithAppContext(`migration:${command}`, async (context) => {
  const dataSource = context.get(DataSource);
  // Booting the context applied every pending migration (under the advisory lock).
  if (command === 'run') {
    const applied = await dataSource.query<{ name: string }[]>('SELECT name FROM migrations ORDER BY id');
    console.log(`schema is up to date: ${applied.map((m) => m.name).join(', ')}`);
    return;
  }
  const sql = await dataSource.driver.createSchemaBuilder().log();
  if (sql.upQueries.length === 0) {
    console.log('no changes: the entities match the schema');
    return;
  }
  const timestamp = Date.now();
  const className = `${name}${timestamp}`;
  const up = sql.upQueries.map((q) => `    await q.query(${quote(q.query)});`).join('\n');
  const down = [...sql.downQueries].reverse().map((q) => `    await q.query(${quote(q.query)});`).join('\n');
  const file = resolve(process.cwd(), 'migrations', `${timestamp}-${name}.ts`);
  writeFileSync(
    file,
    `import { MigrationInterface, QueryRunner } from 'typeorm';

export class ${className} implements MigrationInterface {
  name = '${className}';

  async up(q: QueryRunner): Promise<void> {
${up}
  }

  async down(q: QueryRunner): Promise<void> {
${down}
  }
}
`,
  );
  console.log(`wrote ${file}: review it, then add ${className} to migrations/index.ts`);
});
