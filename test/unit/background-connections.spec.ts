import { BACKGROUND_CONNECTIONS, BackgroundConnections } from '../../src/database/background-connections';

/** A promise and its resolution, for a statement the test answers when it says. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('BackgroundConnections.batched', () => {
  it('sends the items of one moment in one batch, and those that arrive while it runs in the next', async () => {
    const batches: { items: number[]; answer: ReturnType<typeof deferred<string[]>> }[] = [];
    const call = new BackgroundConnections().batched((items: number[]) => {
      const answer = deferred<string[]>();
      batches.push({ items, answer });
      return answer.promise;
    });

    const first = [1, 2, 3].map(call);
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1, 2, 3]]);
    const second = [4, 5].map(call);
    await turn();
    expect(batches).toHaveLength(1);

    batches[0].answer.resolve(['a', 'b', 'c']);
    await expect(Promise.all(first)).resolves.toEqual(['a', 'b', 'c']);
    await turn();
    expect(batches.map((b) => b.items)).toEqual([[1, 2, 3], [4, 5]]);
    batches[1].answer.resolve(['d', 'e']);
    await expect(Promise.all(second)).resolves.toEqual(['d', 'e']);
  });

  it("gives a failed batch's error to each of its items, and sends the next", async () => {
    let sent = 0;
    const call = new BackgroundConnections().batched(async (items: number[]) => {
      if (sent++ === 0) throw new Error('connection lost');
      return items.map((i) => i * 10);
    });
    const failed = [1, 2].map((i) => call(i).catch((e: Error) => e.message));
    await expect(Promise.all(failed)).resolves.toEqual(['connection lost', 'connection lost']);
    await expect(call(3)).resolves.toBe(30);
  });

  it("runs each batch in one of the pool's turns: other background work waits for it", async () => {
    const connections = new BackgroundConnections();
    const held = Array.from({ length: BACKGROUND_CONNECTIONS }, () => deferred<void>());
    const holding = held.map((h) => connections.run(() => h.promise));
    let sent = false;
    const call = connections.batched(async (items: number[]) => ((sent = true), items));
    const answer = call(1);
    await turn();
    expect(sent).toBe(false);
    held[0].resolve();
    await expect(answer).resolves.toBe(1);
    held[1].resolve();
    await Promise.all(holding);
  });
});
