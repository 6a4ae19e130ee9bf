import { Registry } from 'prom-client';
import { ReadReplicas, fallbackReason } from '../../src/database/read-replicas';

/** A replica nobody listens on (port 1 refuses): every read fails, and is answered by the "primary". */
describe('ReadReplicas: a failed replica read goes to the primary, counted, logged once per replica and minute', () => {
  let clock = 0;
  const lines: string[] = [];
  const registry = new Registry();
  const replicas = new ReadReplicas(['postgres://u:secret@127.0.0.1:1/app'], 1, registry, { warn: (m: string) => void lines.push(m) }, () => clock);
  afterAll(() => replicas.onModuleDestroy());

  it('answers from the primary, counts each fallback, and writes one line a minute with the count between', async () => {
    const primary = () => Promise.resolve([{ from: 'primary' }]);
    for (const at of [0, 10_000, 59_999, 60_000, 61_000]) {
      clock = at;
      expect(await replicas.read({ text: 'SELECT 1' }, primary)).toEqual([{ from: 'primary' }]);
    }
    const { values } = await registry.getSingleMetric('database_replica_fallbacks_total')!.get();
    expect(values).toEqual([{ labels: { replica: '1 of 1', reason: 'unavailable' }, value: 5 }]);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^read replica 1 of 1 \(127\.0\.0\.1:1\/app\) failed a read \(unavailable: .*ECONNREFUSED.*\): answered from the primary$/);
    expect(lines[1]).toMatch(/answered from the primary; 2 more since the last line$/);
    expect(lines.join('\n')).not.toContain('secret');
  });

  it.each([
    [{ code: '42P01' }, 'behind'],
    [{ code: '3D000' }, 'behind'],
    [{ code: '40001' }, 'conflict'],
    [{ code: '57P01' }, 'unavailable'],
    [{ code: 'ECONNREFUSED' }, 'unavailable'],
    [{ code: '22P02' }, 'error'],
  ])('classifies %j as %s', (error, reason) => {
    expect(fallbackReason(error)).toBe(reason);
  });
});
