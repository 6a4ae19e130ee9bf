/**
 * Polls `check` until it returns a value other than undefined/false. The
 * timeout is a guard, not a requirement: it only stops a test whose condition
 * never comes, so it is generous (30 s by default, far past what any awaited
 * condition takes on a loaded machine). A test that needs a bound asserts it
 * on what it measured. A timeout says what `seen` last saw, and the last error
 * `check` threw.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 30_000, intervalMs = 25, seen }: { timeoutMs?: number; intervalMs?: number; seen?: () => unknown } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const saw = seen ? `; saw ${await described(seen)}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${saw}${lastError ? ` (last error: ${(lastError as Error).message})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

async function described(seen: () => unknown): Promise<string> {
  try {
    return JSON.stringify(await seen()) ?? 'undefined';
  } catch (error) {
    return `nothing (${(error as Error).message})`;
  }
}
