import { Body, Controller, DynamicModule, HttpCode, Injectable, Module, Post, Req, Res, Type } from '@nestjs/common';
import { HttpResponse, Idempotent, IdempotentOptions } from 'safe-retries';
import { HeaderRequest, principal } from '../library-app';
import { Declined } from './widgets.module';

/**
 * Routes for the idempotency contract that both stores must keep
 * (idempotency-contract.spec.ts): the same handler under
 * `/contract/postgres/...` and `/contract/redis/...`. Its side effect is a
 * counter of executions per name (SideEffects), outside any database, and it
 * can be held mid-effect until the test lets it go: a slow side effect the test
 * controls by events, not by sleeps.
 */
export interface SendDto {
  name: string;
  /** Wait at the gate (SideEffects.release) after counting the execution. */
  hold?: boolean;
  /** The side effect's own pace (ms), e.g. a provider's latency in a race. */
  pace_ms?: number;
  fail?: 'boom' | 'declined';
}

export type StoreKind = NonNullable<IdempotentOptions['store']>;

/** What a held execution does once released. */
export type Release = 'succeed' | 'fail';

interface Held {
  execution: number;
  resume(how: Release): void;
}

/** Counts executions per name; holds executions until released; lets tests await an execution's start. */
@Injectable()
export class SideEffects {
  private readonly counts = new Map<string, number>();
  private readonly held = new Map<string, Held[]>();
  private readonly started = new Map<string, { n: number; resolve(): void }[]>();

  executions(name: string): number {
    return this.counts.get(name) ?? 0;
  }

  /** Resolves once the name's n-th execution has started (at once if it has). */
  executionStarted(name: string, n: number): Promise<void> {
    if (this.executions(name) >= n) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.started.get(name) ?? [];
      list.push({ n, resolve });
      this.started.set(name, list);
    });
  }

  /** Lets the held execution number `execution` of `name` go on, to succeed or to fail. */
  release(name: string, execution: number, how: Release = 'succeed'): void {
    const list = this.held.get(name) ?? [];
    const h = list.find((x) => x.execution === execution);
    if (!h) throw new Error(`execution ${execution} of ${name} is not held`);
    this.held.set(
      name,
      list.filter((x) => x !== h),
    );
    h.resume(how);
  }

  async run(dto: SendDto): Promise<number> {
    const execution = this.executions(dto.name) + 1;
    this.counts.set(dto.name, execution);
    const waiting = this.started.get(dto.name) ?? [];
    for (const w of waiting.filter((x) => x.n <= execution)) w.resolve();
    this.started.set(
      dto.name,
      waiting.filter((x) => x.n > execution),
    );
    if (dto.pace_ms) await new Promise((r) => setTimeout(r, dto.pace_ms));
    if (dto.hold) {
      const how = await new Promise<Release>((resume) => {
        const list = this.held.get(dto.name) ?? [];
        list.push({ execution, resume });
        this.held.set(dto.name, list);
      });
      if (how === 'fail') throw new Error('contract: the held execution failed');
    }
    return execution;
  }
}

/** A media type of our own: a replay must give it back, not application/json. */
export const SEND_CONTENT_TYPE = 'application/vnd.demo.send+json; charset=utf-8';

function contractController(store: StoreKind, commit?: 'one'): Type {
  const route = commit === 'one' ? `${store}-one` : store;
  @Controller(`contract/${route}`)
  class ContractController {
    constructor(readonly effects: SideEffects) {}

    async send(req: HeaderRequest, dto: SendDto, res: unknown): Promise<string> {
      const execution = await this.effects.run(dto);
      if (dto.fail === 'boom') throw new Error('contract: unexpected failure');
      if (dto.fail === 'declined') throw new Declined(`${dto.name} declined`);
      const response = HttpResponse.of(res);
      response.setHeader('Location', `/contract/${route}/sends/${encodeURIComponent(dto.name)}/${execution}`);
      response.setHeader('Content-Type', SEND_CONTENT_TYPE);
      // Keys in a deliberate order and a non-ASCII character: the bytes must come back as sent.
      return JSON.stringify({ zeta: 1, name: dto.name, execution, client: principal(req), note: 'envoyé ✓' });
    }

    @Post('sends')
    @HttpCode(202)
    @Idempotent({ store, commit })
    sends(@Req() req: HeaderRequest, @Body() dto: SendDto, @Res({ passthrough: true }) res: unknown) {
      return this.send(req, dto, res);
    }

    @Post('short-lease')
    @HttpCode(202)
    @Idempotent({ store, commit, lease: '300ms' })
    shortLease(@Req() req: HeaderRequest, @Body() dto: SendDto, @Res({ passthrough: true }) res: unknown) {
      return this.send(req, dto, res);
    }
  }
  Object.defineProperty(ContractController, 'name', { value: `${store[0].toUpperCase()}${store.slice(1)}${commit === 'one' ? 'OneCommit' : ''}ContractController` });
  return ContractController;
}

/**
 * The contract's routes on one store (`redis` needs the module's `redis` option),
 * under `/contract/<store>`, or with `commit: 'one'` under `/contract/<store>-one`.
 */
@Module({})
export class ContractModule {
  static on(store: StoreKind, commit?: 'one'): DynamicModule {
    return { module: ContractModule, controllers: [contractController(store, commit)], providers: [SideEffects], exports: [SideEffects] };
  }
}
