import { Client } from 'pg';

/** What a SqlCounter counted: statements, and the transactions they committed. */
export interface SqlCount {
  statements: number;
  /** COMMIT statements sent. */
  commits: number;
  /** Statements sent outside BEGIN … COMMIT: each one commits on its own. */
  autocommits: number;
  /** Statements by their leading keywords and table. */
  kinds: Record<string, number>;
}

/**
 * Counts the SQL statements this process sends, by wrapping pg's
 * Client.prototype.query (TypeORM and the store's own pool both end there).
 * Only counts while `active`; records the first words of each statement, and
 * follows each connection's BEGIN … COMMIT/ROLLBACK to tell the commits: a
 * COMMIT, or a statement sent outside a transaction (autocommit).
 */
export class SqlCounter {
  active = false;
  count = 0;
  commits = 0;
  autocommits = 0;
  readonly kinds = new Map<string, number>();
  private original?: typeof Client.prototype.query;
  /** The connections inside BEGIN … COMMIT/ROLLBACK. */
  private readonly inTransaction = new WeakSet<Client>();

  install(): void {
    if (this.original) return;
    const original = Client.prototype.query;
    this.original = original;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the patched method's `this` is the pg Client
    const counter = this;
    Client.prototype.query = function (this: Client, ...args: unknown[]) {
      const first = args[0];
      const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '?');
      counter.seen(this, text);
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof Client.prototype.query;
  }

  uninstall(): void {
    if (this.original) Client.prototype.query = this.original;
    this.original = undefined;
  }

  /** Zeroes the counts. */
  reset(): void {
    this.count = 0;
    this.commits = 0;
    this.autocommits = 0;
    this.kinds.clear();
  }

  snapshot(): SqlCount {
    return { statements: this.count, commits: this.commits, autocommits: this.autocommits, kinds: Object.fromEntries(this.kinds) };
  }

  /** Counts the statements `fn` sends. */
  async measure<T>(fn: () => Promise<T>): Promise<{ result: T; statements: number; kinds: Record<string, number> }> {
    this.reset();
    this.active = true;
    try {
      const result = await fn();
      return { result, statements: this.count, kinds: Object.fromEntries(this.kinds) };
    } finally {
      this.active = false;
    }
  }

  private seen(client: Client, text: string): void {
    // Followed even while not counting (a transaction may open before counting starts), from the first word alone.
    const keyword = /^\s*(\w+)/.exec(text)?.[1].toUpperCase();
    const opens = keyword === 'BEGIN' || keyword === 'START';
    const closes = keyword === 'COMMIT' || keyword === 'ROLLBACK';
    const inside = this.inTransaction.has(client);
    if (opens) this.inTransaction.add(client);
    if (closes) this.inTransaction.delete(client);
    if (!this.active) return;
    const kind = describe(text);
    this.count += 1;
    this.kinds.set(kind, (this.kinds.get(kind) ?? 0) + 1);
    if (keyword === 'COMMIT') this.commits += 1;
    else if (!inside && !opens && !closes) this.autocommits += 1;
  }
}

/** A short name for a statement: its leading keywords and table. */
function describe(sql: string): string {
  const s = sql.replace(/\s+/g, ' ').trim();
  const cte = /^WITH (\w+) AS \(/i.exec(s);
  if (cte) return `WITH ${cte[1]} AS (…)`;
  const m = /^(INSERT INTO "?\w+"?|UPDATE "?\w+"?|DELETE FROM "?\w+"?|SELECT|START TRANSACTION|BEGIN|COMMIT|ROLLBACK)/i.exec(s);
  if (!m) return s.slice(0, 30);
  const from = m[1].toUpperCase() === 'SELECT' ? /\bFROM "?(\w+)/i.exec(s) : null;
  return from ? `SELECT … FROM ${from[1]}` : m[1];
}
