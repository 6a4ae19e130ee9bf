import { userInfo } from 'node:os';
import { parseArgs } from 'node:util';
import { AttentionDecision, AttentionRow } from '../payments/attention/attention.repository';
import { ATTENTION_HOLD_MS, OperationAttention } from '../payments/attention/operation-attention';
import { runWithAppContext } from './with-app-context';

const USAGE = `usage:
  npm run attention -- list [--limit N]
  npm run attention -- resolve <attention id> fail --reason "why" [--by name] [--wait]
  npm run attention -- resolve <attention id> reask [--by name] [--wait]
  npm run attention -- resolve <attention id> acknowledge --reason "what was done" [--by name]`;

/** How long --wait waits for the operation's next attempt to apply a decision. */
const WAIT_MS = 3 * ATTENTION_HOLD_MS;

/**
 * `npm run attention`: the operator's surface for payments and refunds handed
 * to a person (requires_attention). `list` shows the open hand-overs, oldest
 * first, with their evidence. `resolve` records a decision, once, with who
 * made it and why (the audit): `fail` marks the operation failed, releasing
 * what it reserved, once the card network's word about the operation's own
 * object allows it (a payment's intent canceled, no refund of ours listed;
 * the network's word wins otherwise, and while it cannot be asked the
 * decision waits, saying why); `reask` has the network asked again. The
 * running app applies the decision at the operation's next attempt (its
 * recovery job, or the client's retry), under the operation's own key, so it
 * never races a resume; the key then answers with the outcome. `--wait` waits
 * for that and prints it. A contradiction (the network's event against a
 * final record) belongs to no operation: `acknowledge` ends it at once.
 */
/** A usage error is told before the app's modules start. */
function refuse(message: string): never {
  console.error(message);
  process.exit(1);
}

function parse() {
  try {
    return parseArgs({
      allowPositionals: true,
      options: { reason: { type: 'string' }, by: { type: 'string' }, wait: { type: 'boolean' }, limit: { type: 'string' } },
    });
  } catch (error) {
    return refuse(`${(error as Error).message}\n${USAGE}`);
  }
}

const { positionals, values } = parse();
const [command, id, decision] = positionals;

if (command === 'list') {
  if (positionals.length !== 1) refuse(USAGE);
  runWithAppContext('attention', async (context) => {
    const rows = await context.get(OperationAttention).listOpen(Number(values.limit ?? 100));
    if (rows.length === 0) console.log('no operation requires attention');
    for (const row of rows) console.log(describe(row));
  });
} else {
  if (command !== 'resolve' || !id || !['fail', 'reask', 'acknowledge'].includes(decision) || positionals.length !== 3) refuse(USAGE);
  if (decision !== 'reask' && !values.reason?.trim()) refuse(`${decision} needs --reason "why" (it is kept in the audit)`);
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) refuse(`not an attention id: ${id}`);
  runWithAppContext('attention', (context) => resolve(context.get(OperationAttention), id.toLowerCase(), decision as AttentionDecision));
}

async function resolve(attention: OperationAttention, id: string, decision: AttentionDecision): Promise<void> {
  const by = values.by?.trim() || userInfo().username;
  const decided = await attention.decide(id, decision, by, values.reason?.trim() ?? null);
  if (!decided) {
    const row = await attention.find(id);
    if (!row) throw new Error(`no attention ${id}`);
    if (row.resolved_at) throw new Error(`already resolved (${row.resolution}): nothing changed`);
    if (row.decision) throw new Error(`already decided (${row.decision} by ${row.decided_by}): nothing changed`);
    throw new Error(row.reason === 'contradicted' ? 'a contradiction takes only acknowledge: nothing changed' : 'acknowledge is for contradictions; use fail or reask: nothing changed');
  }
  if (decided.resolved_at) return console.log(`recorded: ${decision} by ${by}; resolved: ${decided.resolution} at ${decided.resolved_at}`);
  console.log(`recorded: ${decision} by ${by}; the app applies it at the operation's next attempt (within about ${ATTENTION_HOLD_MS / 1000} s)`);
  if (!values.wait) return;
  const until = Date.now() + WAIT_MS;
  for (;;) {
    const row = await attention.find(decided.id);
    if (row?.resolved_at) return console.log(`resolved: ${row.resolution} at ${row.resolved_at}`);
    if (Date.now() > until) {
      throw new Error(`not applied yet: ${row?.waiting ?? 'is the app running with its recovery job?'} (the decision stays recorded)`);
    }
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

function describe(row: AttentionRow): string {
  const decided = row.decision ? ` decided ${row.decision} by ${row.decided_by} at ${row.decided_at}${row.decision_reason ? ` (${row.decision_reason})` : ''}` : '';
  const waiting = row.waiting ? `; ${row.waiting}` : '';
  return `${row.id} ${row.operation} ${row.record_id} client ${row.client_id} since ${row.created_at} (${row.reason}): ${row.evidence}${decided}${waiting}`;
}
