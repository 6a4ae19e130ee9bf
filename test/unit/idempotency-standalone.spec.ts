import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** The idempotency module is a library: it imports packages and its own files, never the app around it. */
describe('src/idempotency stands alone', () => {
  const dir = join(__dirname, '../../src/idempotency');
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));

  it.each(files)('%s imports nothing outside the module', (file) => {
    const source = readFileSync(join(dir, file), 'utf8');
    const specifiers = [...source.matchAll(/\bfrom\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)|\brequire\(\s*'([^']+)'\s*\)/g)].map((m) => m[1] ?? m[2] ?? m[3]);
    const escapes = specifiers.filter((s) => s.startsWith('.') && join('src/idempotency', file, '..', s).split(/[\\/]/)[1] !== 'idempotency');
    expect(escapes).toEqual([]);
  });
});
