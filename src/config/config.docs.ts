import { variables } from './env.schema';

/**
 * The reference of the variables, rendered from env.schema.ts: the table of
 * docs/configuration.md (between its markers) and the whole of .env.example.
 * test/unit/config.spec.ts fails when either file differs from what is
 * rendered here; `npm run docs:config` writes them.
 */

interface Variable {
  name: string;
  description: string;
  default?: string;
  example?: string;
}

const TABLE_START = '<!-- variables: generated from src/config/env.schema.ts by `npm run docs:config` -->';
const TABLE_END = '<!-- variables: end -->';

/** The variables in their order, with what the schema says of each. */
function documentedVariables(): Variable[] {
  return Object.entries(variables.shape).map(([name, schema]) => {
    const meta = (schema.meta() ?? {}) as { description?: string; default?: string; example?: string };
    if (!meta.description) throw new Error(`${name} has no description in env.schema.ts`);
    return { name, description: meta.description, default: meta.default, example: meta.example };
  });
}

/** The markdown table: variable, default, what it does. */
export function renderVariablesTable(): string {
  const cell = (text: string) => text.replace(/\|/g, '\\|');
  const rows = documentedVariables().map((v) => `| \`${v.name}\` | ${v.default === undefined ? 'unset' : `\`${v.default}\``} | ${cell(v.description)} |`);
  return ['| Variable | Default | What it does |', '|---|---|---|', ...rows].join('\n');
}

/** `document` with the text between its markers replaced by the table. */
export function withVariablesTable(document: string): string {
  const start = document.indexOf(TABLE_START);
  const end = document.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`the markers ${TABLE_START} and ${TABLE_END} are missing`);
  return `${document.slice(0, start + TABLE_START.length)}\n${renderVariablesTable()}\n${document.slice(end)}`;
}

const ENV_EXAMPLE_HEAD = `Every variable the service reads, with its default (rendered from src/config/env.schema.ts by
\`npm run docs:config\`; docs/configuration.md says more). Copy to .env for \`npm start\`, or export
them (docker compose reads docker/.env instead: docker/.env.example). An empty value means "use
the default"; a variable the service no longer reads stops the boot, naming its replacement.`;

const ENV_EXAMPLE_TAIL = `The standalone simulator (npm run card-network) reads CARD_NETWORK_SECRET, CARD_NETWORK_DELAY
and CARD_NETWORK_WEBHOOK_SECRET from the same environment; its own variables are in
packages/card-network-simulator/README.md.`;

/** The demo key is set in .env.example: the README's examples use it (production refuses it). */
const SET_IN_EXAMPLE = new Set(['API_KEYS']);

/** .env.example: each variable's description as a comment, then the variable with its default (or, commented out, an example). */
export function renderEnvExample(): string {
  const lines = [...comment(ENV_EXAMPLE_HEAD), ''];
  for (const v of documentedVariables()) {
    lines.push(...comment(v.description.replace(/`/g, '')));
    if (v.default !== undefined) lines.push(`${v.name}=${v.default}`);
    else if (SET_IN_EXAMPLE.has(v.name)) lines.push(`${v.name}=${v.example}`);
    else lines.push(`# ${v.name}=${v.example ?? ''}`);
  }
  lines.push('', ...comment(ENV_EXAMPLE_TAIL));
  return `${lines.join('\n')}\n`;
}

/** Text as `# ` lines of at most 100 characters (its own line breaks kept). */
function comment(text: string): string[] {
  const out: string[] = [];
  for (const paragraph of text.split('\n')) {
    let line = '#';
    for (const word of paragraph.split(' ')) {
      if (line.length > 1 && line.length + 1 + word.length > 100) {
        out.push(line);
        line = '#';
      }
      line += ` ${word}`;
    }
    out.push(line);
  }
  return out;
}
