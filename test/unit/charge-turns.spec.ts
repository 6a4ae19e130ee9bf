import fc from 'fast-check';
import { ChargeTurns, Refusal, Turn } from '../../src/payments/admission/charge-admission';

/**
 * ChargeTurns' policy without HTTP: requests are named `<client><n>` (a1, b2),
 * and `events` lists, in order, who got a slot (`start a1`) and who lost its
 * queue place to another client (`out a3`).
 */
function turns(limit: number, queueLimit: number) {
  const policy = new ChargeTurns(limit, queueLimit);
  const held = new Map<string, Turn>();
  const events: string[] = [];
  return {
    policy,
    events,
    /** Asks for a slot for each named request, in order: their outcomes. */
    ask(...names: string[]): ('now' | 'queued' | Refusal)[] {
      return names.map((name) => {
        const turn = policy.request(name[0], () => events.push(`start ${name}`), () => events.push(`out ${name}`));
        if (typeof turn === 'string') return turn;
        held.set(name, turn);
        if (turn.now) events.push(`start ${name}`);
        return turn.now ? 'now' : 'queued';
      });
    },
    end(...names: string[]): void {
      for (const name of names) held.get(name)!.end();
    },
    figures: () => ({ inFlight: policy.inFlight, queued: policy.waiting }),
  };
}

describe('ChargeTurns', () => {
  it('lets a client alone take every slot, however many it holds; its others queue in arrival order', () => {
    const t = turns(3, 10);
    expect(t.ask('a1', 'a2', 'a3', 'a4', 'a5')).toEqual(['now', 'now', 'now', 'queued', 'queued']);
    expect(t.figures()).toEqual({ inFlight: 3, queued: 2 });
    t.end('a2', 'a1');
    expect(t.events.slice(3)).toEqual(['start a4', 'start a5']);
    expect(t.figures()).toEqual({ inFlight: 3, queued: 0 });
  });

  it('gives a newcomer the next freed slots, ahead of the queue of a client that holds them all, until it holds as many', () => {
    const t = turns(4, 20);
    expect(t.ask('a1', 'a2', 'a3', 'a4', 'a5', 'a6')).toEqual(['now', 'now', 'now', 'now', 'queued', 'queued']);
    expect(t.ask('b1', 'b2', 'b3')).toEqual(['queued', 'queued', 'queued']);
    t.events.length = 0;
    // a's queue came first, but a holds every slot: b takes the freed ones while it holds fewer.
    t.end('a1', 'a2');
    expect(t.events).toEqual(['start b1', 'start b2']);
    // 2 each: the share of two clients waiting. a has fewer at work as its slots free.
    t.end('a3', 'a4');
    expect(t.events).toEqual(['start b1', 'start b2', 'start a5', 'start a6']);
    t.end('b1');
    expect(t.events.at(-1)).toBe('start b3');
    expect(t.figures()).toEqual({ inFlight: 4, queued: 0 });
  });

  it('gives a freed slot to the waiting client with the fewest at work, not to the oldest waiter', () => {
    const t = turns(4, 20);
    expect(t.ask('a1', 'a2', 'a3', 'd1', 'a4', 'a5', 'd2')).toEqual(['now', 'now', 'now', 'now', 'queued', 'queued', 'queued']);
    t.events.length = 0;
    // a is left with 2 at work, d has 1: d2 goes, though a4 and a5 came first and a was served less recently.
    t.end('a1');
    expect(t.events).toEqual(['start d2']);
    // a has 1, d 2: a4.
    t.end('a2');
    expect(t.events).toEqual(['start d2', 'start a4']);
  });

  it('serves tied clients round robin: a newcomer first, then the one served least recently', () => {
    const t = turns(2, 20);
    t.ask('a1', 'b1', 'a2', 'a3', 'b2', 'b3', 'c1');
    t.events.length = 0;
    t.end('b1');
    t.end('a1');
    t.end('c1');
    t.end('b2');
    expect(t.events).toEqual(['start c1', 'start a2', 'start b2', 'start b3']);
  });

  it('never leaves a slot free while a request waits, and gives each freed slot to a waiting client with the fewest at work', () => {
    const limit = 4;
    const op = fc.oneof(
      fc.record({ ask: fc.constantFrom('a', 'b', 'c') }),
      fc.record({ end: fc.nat() }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const policy = new ChargeTurns(limit, 6);
        // The model: each live request's client and state, in arrival order.
        const live: { client: string; state: 'working' | 'waiting'; turn?: Turn }[] = [];
        const count = (client: string, state: 'working' | 'waiting') => live.filter((r) => r.client === client && r.state === state).length;
        const start = (request: (typeof live)[number]) => {
          // Its client's oldest waiter, and no waiting client holds fewer.
          expect(live.find((r) => r.client === request.client && r.state === 'waiting')).toBe(request);
          for (const other of live) if (other.state === 'waiting') expect(count(request.client, 'working')).toBeLessThanOrEqual(count(other.client, 'working'));
          request.state = 'working';
        };
        for (const o of ops) {
          if ('ask' in o) {
            const request: (typeof live)[number] = { client: o.ask, state: 'waiting' };
            const turn = policy.request(o.ask, () => start(request), () => live.splice(live.indexOf(request), 1));
            if (typeof turn === 'string') continue;
            request.turn = turn;
            live.push(request);
            if (turn.now) {
              expect(live.filter((r) => r.state === 'waiting')).toEqual([request]);
              request.state = 'working';
            }
          } else if (live.length > 0) {
            const [request] = live.splice(o.end % live.length, 1);
            request.turn!.end();
          }
          const working = live.filter((r) => r.state === 'working').length;
          const waiting = live.length - working;
          expect({ inFlight: policy.inFlight, queued: policy.waiting }).toEqual({ inFlight: working, queued: waiting });
          if (waiting > 0) expect(working).toBe(limit);
        }
      }),
    );
  });

  it('lets a client alone use the whole queue; its share shrinks as other clients wait', () => {
    const t = turns(1, 6);
    expect(t.ask('x1', 'a1', 'a2', 'a3', 'a4')).toEqual(['now', 'queued', 'queued', 'queued', 'queued']);
    // b waits too: the share is 6 / 2 = 3. a, past it, is refused; b, under it, takes a's newest place once the queue is full.
    expect(t.ask('b1', 'a5', 'b2', 'b3', 'b4')).toEqual(['queued', 'over_share', 'queued', 'queued', 'queue_full']);
    expect(t.events).toEqual(['start x1', 'out a4']);
    // c makes the share 2: it takes the newest places of the longest queues, a's then b's, and no more.
    expect(t.ask('c1', 'c2', 'c3')).toEqual(['queued', 'queued', 'queue_full']);
    expect(t.events).toEqual(['start x1', 'out a4', 'out a3', 'out b3']);
    expect(t.figures()).toEqual({ inFlight: 1, queued: 6 });
    // The pushed-out requests' ends give back nothing: they hold nothing.
    t.end('a4', 'a3', 'b3');
    expect(t.figures()).toEqual({ inFlight: 1, queued: 6 });
  });

  it('refuses when the queue is full and no client is past its share', () => {
    const t = turns(1, 2);
    expect(t.ask('x1', 'a1', 'b1', 'c1', 'a2')).toEqual(['now', 'queued', 'queued', 'queue_full', 'queue_full']);
    expect(t.events).toEqual(['start x1']);
  });

  it('a waiter that ends gives back its place and never starts; a second end changes nothing', () => {
    const t = turns(1, 5);
    t.ask('a1', 'b1', 'c1');
    t.end('b1', 'b1');
    expect(t.figures()).toEqual({ inFlight: 1, queued: 1 });
    t.end('a1', 'a1');
    expect(t.events).toEqual(['start a1', 'start c1']);
    expect(t.figures()).toEqual({ inFlight: 1, queued: 0 });
    t.end('c1');
    expect(t.figures()).toEqual({ inFlight: 0, queued: 0 });
  });

  it('queues nothing with a queue limit of 0', () => {
    const t = turns(1, 0);
    expect(t.ask('a1', 'a2', 'b1')).toEqual(['now', 'queue_full', 'queue_full']);
  });
});
