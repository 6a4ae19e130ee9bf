import { Client } from 'pg';

/**
 * Counts the SQL statements this process sends, by wrapping pg's
 * Client.prototype.query (TypeORM and the store's own pool both end there).
 * Only counts while `active`; records the first words of each statement.
 */
export class SqlCounter {
  active = false;
  count = 0;
  readonly kinds = new Map<string, number>();
  private original?: typeof Client.prototype.query;

  install(): void {
    if (this.original) return;
    const original = Client.prototype.query;
    this.original = original;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the patched method's `this` is the pg Client
    const counter = this;
    Client.prototype.query = function (this: Client, ...args: unknown[]) {
      if (counter.active) {
        counter.count += 1;
        const first = args[0];
        const text = typeof first === 'string' ? first : (first as { text?: string } | undefined)?.text ?? '?';
        const kind = describe(text);
        counter.kinds.set(kind, (counter.kinds.get(kind) ?? 0) + 1);
      }
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof Client.prototype.query;
  }

  uninstall(): void {
    if (this.original) Client.prototype.query = this.original;
    this.original = undefined;
  }

  /** Counts the statements `fn` sends. */
  async measure<T>(fn: () => Promise<T>): Promise<{ result: T; statements: number; kinds: Record<string, number> }> {
    this.count = 0;
    this.kinds.clear();
    this.active = true;
    try {
      const result = await fn();
      return { result, statements: this.count, kinds: Object.fromEntries(this.kinds) };
    } finally {
      this.active = false;
    }
  }
}

/** A short name for a statement: its leading keywords and table. */
function describe(sql: string): string {
  const s = sql.replace(/\s+/g, ' ').trim();
  const cte = /^WITH (\w+) AS \(/i.exec(s);
  if (cte) return `WITH ${cte[1]} AS (…)`;
  const m = /^(INSERT INTO \w+|UPDATE \w+|DELETE FROM \w+|SELECT|START TRANSACTION|BEGIN|COMMIT|ROLLBACK)/i.exec(s);
  return m ? m[1] : s.slice(0, 30);
}
