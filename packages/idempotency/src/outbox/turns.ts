/**
 * At most `size` works at once; the others wait their turn, first come first
 * served. What a background task uses to hold no more than its share of a
 * connection pool that requests need too.
 */
export class Turns {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`Turns: size must be a positive integer, got ${size}`);
    this.free = size;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      // The turn passes straight to the next in line, so a newcomer cannot cut in.
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    }
  }
}
