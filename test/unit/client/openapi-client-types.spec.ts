import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const GENERATOR = join(__dirname, '..', '..', '..', 'scripts', 'openapi-client-types.mjs');
const HEADER = '// Generated from the OpenAPI document by scripts/openapi-client-types.mjs; do not edit (npm run client:types)';

/** clientTypes() of the generator, through its CLI: jest runs CommonJS and cannot load the .mjs. */
function clientTypes(document: unknown): string {
  return execFileSync(process.execPath, [GENERATOR, '-', '-'], { input: JSON.stringify(document), encoding: 'utf8' });
}

/** A small document with each feature the generator handles, schemas out of order. */
const document = {
  openapi: '3.0.0',
  paths: {},
  components: {
    schemas: {
      Widget: {
        type: 'object',
        description: 'A widget.\nSecond line: */ stays inside the comment.',
        properties: {
          id: { type: 'string', format: 'uuid' },
          count: { type: 'integer', description: 'How many' },
          ratio: { type: 'number' },
          active: { type: 'boolean' },
          status: { type: 'string', enum: ['on', 'off'] },
          reason: { type: 'string', enum: ['jammed', "it's broken"], nullable: true },
          note: { type: 'string', nullable: true },
          tags: { type: 'array', items: { type: 'string' } },
          levels: { type: 'array', items: { type: 'string', enum: ['low', 'high'] } },
          part: { $ref: '#/components/schemas/Part' },
          parts: { type: 'array', items: { $ref: '#/components/schemas/Part' } },
          extra: { type: 'object', additionalProperties: { type: 'integer' } },
          anything: {},
          'x-kebab': { type: 'string', deprecated: true },
          both: { allOf: [{ $ref: '#/components/schemas/Part' }, { type: 'object', properties: { n: { type: 'number' } } }] },
          either: { oneOf: [{ type: 'string' }, { type: 'integer' }] },
          maybe: { type: ['string', 'null'] },
        },
        required: ['id', 'count', 'status', 'reason', 'part'],
      },
      Part: {
        type: 'object',
        properties: { sku: { type: 'string' } },
        required: ['sku'],
      },
      Color: { type: 'string', enum: ['red', 'green'], description: 'A named schema that is an enum' },
      Empty: { type: 'object' },
    },
  },
};

const expected = `${HEADER}

/** A named schema that is an enum */
export type Color = 'red' | 'green';

export type Empty = Record<string, unknown>;

export interface Part {
  sku: string;
}

/**
 * A widget.
 * Second line: *\\/ stays inside the comment.
 */
export interface Widget {
  /** Format: uuid */
  id: string;
  /** How many */
  count: number;
  ratio?: number;
  active?: boolean;
  status: 'on' | 'off';
  reason: 'jammed' | 'it\\'s broken' | null;
  note?: string | null;
  tags?: string[];
  levels?: ('low' | 'high')[];
  part: Part;
  parts?: Part[];
  extra?: Record<string, number>;
  anything?: unknown;
  /** @deprecated */
  'x-kebab'?: string;
  both?: Part & {
    n?: number;
  };
  either?: string | number;
  maybe?: string | null;
}
`;

describe('openapi-client-types', () => {
  it('turns components.schemas into TypeScript declarations, schemas sorted by name', () => {
    expect(clientTypes(document)).toBe(expected);
  });

  it('is deterministic: the order schemas arrive in does not matter', () => {
    const reversed = { components: { schemas: Object.fromEntries(Object.entries(document.components.schemas).reverse()) } };
    expect(clientTypes(reversed)).toBe(clientTypes(document));
  });

  it('writes only the header for a document without schemas', () => {
    expect(clientTypes({ openapi: '3.0.0', paths: {} })).toBe(`${HEADER}\n`);
  });

  it('reads and writes files, and refuses a call without both', () => {
    const dir = mkdtempSync(join(tmpdir(), 'openapi-client-types-'));
    try {
      writeFileSync(join(dir, 'doc.json'), JSON.stringify(document));
      execFileSync(process.execPath, [GENERATOR, join(dir, 'doc.json'), join(dir, 'out.ts')]);
      expect(readFileSync(join(dir, 'out.ts'), 'utf8')).toBe(expected);

      const usage = spawnSync(process.execPath, [GENERATOR, join(dir, 'doc.json')], { encoding: 'utf8' });
      expect(usage.status).toBe(2);
      expect(usage.stderr).toContain('usage:');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
