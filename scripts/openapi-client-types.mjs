#!/usr/bin/env node
// The client's types (src/client/api.generated.ts) from the OpenAPI document the
// app serves at /docs-json, which @nestjs/swagger builds from the DTOs: the DTOs
// stay the one source of each shape, and test/e2e/client-types.spec.ts fails
// when the committed file no longer matches what the server documents.
//
// Only `components.schemas` is read. Each schema becomes one declaration, sorted
// by name (properties keep the document's order, which is the DTO's):
//   object with properties   -> interface; a property not in `required` is `?`
//   nullable: true           -> `| null` (also OpenAPI 3.1 `type: [..., 'null']`)
//   enum                     -> a union of literals
//   array                    -> T[]
//   $ref                     -> the referenced schema's name
//   integer, number          -> number
//   allOf / oneOf / anyOf    -> intersection / union
//   description, format      -> the doc comment
// Anything else is `unknown`. No dependencies, deterministic output.
//
// Usage: node scripts/openapi-client-types.mjs <document.json|-> <out.ts|->
// (`-` is stdin or stdout). `npm run client:types` regenerates the committed file.
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const HEADER = '// Generated from the OpenAPI document by scripts/openapi-client-types.mjs; do not edit (npm run client:types)';

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** TypeScript declarations for the document's `components.schemas`. */
export function clientTypes(document) {
  const schemas = document?.components?.schemas ?? {};
  const names = Object.keys(schemas).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const declarations = names.map((name) => declaration(typeName(name), schemas[name]));
  return [HEADER, '', ...declarations.flatMap((d) => [d, ''])].join('\n').replace(/\n\n$/, '\n');
}

function declaration(name, schema) {
  const comment = docComment(schema, '');
  if (isInterface(schema)) return `${comment}export interface ${name} ${objectBody(schema, '')}`;
  return `${comment}export type ${name} = ${type(schema, '')};`;
}

/** A plain object with named properties (and nothing that needs a type alias). */
function isInterface(schema) {
  return (
    schemaType(schema).types.length === 1 &&
    schemaType(schema).types[0] === 'object' &&
    !schemaType(schema).nullable &&
    schema.properties !== undefined &&
    Object.keys(schema.properties).length > 0 &&
    !schema.allOf &&
    !schema.oneOf &&
    !schema.anyOf &&
    !schema.enum
  );
}

/** The schema's types and nullability, for OpenAPI 3.0 (`nullable`) and 3.1 (`type: [..., 'null']`). */
function schemaType(schema) {
  const declared = Array.isArray(schema.type) ? schema.type : schema.type === undefined ? [] : [schema.type];
  const types = declared.filter((t) => t !== 'null');
  return { types, nullable: schema.nullable === true || declared.includes('null') };
}

function type(schema, indent) {
  if (!schema || typeof schema !== 'object') return 'unknown';
  const { types, nullable } = schemaType(schema);
  let t = baseType(schema, types, indent);
  if (nullable && t !== 'unknown' && !/(^|\| )null$/.test(t)) t = `${t} | null`;
  return t;
}

function baseType(schema, types, indent) {
  if (typeof schema.$ref === 'string') return refName(schema.$ref);
  if (Array.isArray(schema.enum)) return union([...new Set(schema.enum.map(literal))]);
  if (schema.allOf) return composite(schema.allOf, ' & ', indent);
  if (schema.oneOf) return composite(schema.oneOf, ' | ', indent);
  if (schema.anyOf) return composite(schema.anyOf, ' | ', indent);
  if (types.length > 1) return union(types.map((t) => baseType({ ...schema, type: t }, [t], indent)));
  switch (types[0]) {
    case 'string':
      return 'string';
    case 'integer':
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'array':
      return `${element(type(schema.items, indent))}[]`;
    case 'object':
      return objectType(schema, indent);
    default:
      return schema.properties ? objectType(schema, indent) : 'unknown';
  }
}

function composite(parts, separator, indent) {
  const types = parts.map((p) => type(p, indent));
  return types.length === 1 ? types[0] : types.map(element).join(separator);
}

function union(types) {
  return types.length ? types.join(' | ') : 'never';
}

/** An array's element type, parenthesised when it is a union or intersection. */
function element(t) {
  return / [|&] /.test(t) && !t.startsWith('{') ? `(${t})` : t;
}

function objectType(schema, indent) {
  if (schema.properties && Object.keys(schema.properties).length) return objectBody(schema, indent);
  const extra = schema.additionalProperties;
  if (extra && typeof extra === 'object') return `Record<string, ${type(extra, indent)}>`;
  return 'Record<string, unknown>';
}

function objectBody(schema, indent) {
  const inner = `${indent}  `;
  const required = new Set(schema.required ?? []);
  const lines = Object.entries(schema.properties).map(([key, property]) => {
    const name = IDENTIFIER.test(key) ? key : `'${escape(key)}'`;
    return `${docComment(property, inner)}${inner}${name}${required.has(key) ? '' : '?'}: ${type(property, inner)};`;
  });
  return `{\n${lines.join('\n')}\n${indent}}`;
}

function docComment(schema, indent) {
  if (!schema || typeof schema !== 'object') return '';
  const lines = [];
  if (typeof schema.description === 'string' && schema.description.trim()) {
    lines.push(...schema.description.trim().split(/\r?\n/).map((l) => l.trimEnd()));
  }
  if (typeof schema.format === 'string') lines.push(`Format: ${schema.format}`);
  if (schema.deprecated === true) lines.push('@deprecated');
  if (!lines.length) return '';
  const safe = lines.map((l) => l.replace(/\*\//g, '*\\/'));
  if (safe.length === 1) return `${indent}/** ${safe[0]} */\n`;
  return `${indent}/**\n${safe.map((l) => (l ? `${indent} * ${l}` : `${indent} *`)).join('\n')}\n${indent} */\n`;
}

function literal(value) {
  if (value === null) return 'null';
  if (typeof value === 'string') return `'${escape(value)}'`;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return 'unknown';
}

function escape(text) {
  return text.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n').replace(/\r/g, '\\r');
}

function refName(ref) {
  const name = decodeURIComponent(ref.split('/').pop() ?? '').replace(/~1/g, '/').replace(/~0/g, '~');
  return typeName(name);
}

/** A schema name as a TypeScript identifier. */
function typeName(name) {
  const id = name.replace(/[^A-Za-z0-9_$]/g, '_');
  return /^[0-9]/.test(id) ? `_${id}` : id;
}

function main(args) {
  const [input, output] = args;
  if (!input || !output || args.length !== 2) {
    console.error('usage: node scripts/openapi-client-types.mjs <document.json|-> <out.ts|->');
    process.exit(2);
  }
  const document = JSON.parse(readFileSync(input === '-' ? 0 : input, 'utf8'));
  const text = clientTypes(document);
  if (output === '-') process.stdout.write(text);
  else writeFileSync(output, text);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
