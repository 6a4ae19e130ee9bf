import { Body, CallHandler, Controller, ExecutionContext, HttpCode, Injectable, Module, NestInterceptor, OnModuleInit, Post, Res, UseInterceptors } from '@nestjs/common';
import { Observable, from, lastValueFrom } from 'rxjs';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { InjectDataSource } from '@nestjs/typeorm';
import { IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { DataSource } from 'typeorm';
import { CurrentClient } from '../../../src/auth/current-client.decorator';
import type { AuthenticatedClient } from '../../../src/auth/authenticated-client';
import type { ResponseHeaders } from '../../../src/http/http';
import { BusinessOutcomeException } from '../../../src/http/problem';
import { Idempotent } from '../../../packages/idempotency/src/module/idempotent.decorator';

/**
 * A small demo feature for the idempotency module's own e2e tests: it writes a
 * row through the ambient transaction, optionally sleeps (a slow worker), and
 * fails on demand (an unexpected error, or a business outcome that is stored).
 */
export class CreateWidgetDto {
  @IsString()
  @MaxLength(50)
  name!: string;

  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(10_000)
  delay_ms?: number;

  @IsOptional()
  @IsIn(['boom', 'declined'])
  fail?: 'boom' | 'declined';

  @IsOptional()
  @IsInt()
  client_ts?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Writes a widget through the ambient transaction; sleeps and fails as the body asks. */
async function createWidget(txHost: TransactionHost<TransactionalAdapterTypeOrm>, client: AuthenticatedClient, dto: CreateWidgetDto, res: ResponseHeaders) {
  const [row] = await txHost.tx.query<{ id: string; created_at: Date }[]>(
    'INSERT INTO demo_widgets (client_id, name) VALUES ($1, $2) RETURNING id, created_at',
    [client.id, dto.name],
  );
  if (dto.delay_ms) await sleep(dto.delay_ms);
  if (dto.fail === 'boom') throw new Error('demo: unexpected failure');
  if (dto.fail === 'declined') {
    throw new BusinessOutcomeException({ status: 402, code: 'card_declined', title: 'Card Declined', detail: `widget ${row.id} declined` });
  }
  res.header('Location', `/demo/widgets/${row.id}`);
  return { id: row.id, name: dto.name, zeta: 1, alpha: 2, created_at: row.created_at };
}

@Controller('demo')
export class DemoController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  private create(client: AuthenticatedClient, dto: CreateWidgetDto, res: ResponseHeaders) {
    return createWidget(this.txHost, client, dto, res);
  }

  @Post('widgets')
  @Idempotent()
  widgets(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: ResponseHeaders) {
    return this.create(client, dto, res);
  }

  @Post('short-lease')
  @Idempotent({ lease: '300ms' })
  shortLease(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: ResponseHeaders) {
    return this.create(client, dto, res);
  }

  @Post('short-retention')
  @Idempotent({ lease: '500ms', retention: '1500ms' })
  shortRetention(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: ResponseHeaders) {
    return this.create(client, dto, res);
  }

  @Post('waiting')
  @Idempotent({ wait: '5s' })
  waiting(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: ResponseHeaders) {
    return this.create(client, dto, res);
  }

  @Post('short-wait')
  @Idempotent({ wait: '300ms' })
  shortWait(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: ResponseHeaders) {
    return this.create(client, dto, res);
  }

  @Post('optional')
  @Idempotent({ required: false })
  optional(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: ResponseHeaders) {
    return this.create(client, dto, res);
  }

  @Post('accepted')
  @HttpCode(202)
  @Idempotent({ fingerprint: (req: { body?: unknown }) => ({ ...(req.body as object), client_ts: undefined }) })
  accepted(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: ResponseHeaders) {
    return this.create(client, dto, res);
  }
}

/**
 * An app's own interceptor that opens a transaction around the whole request
 * (the idempotent handler joins it) and, when the request has the header
 * `X-Demo-Roll-Back`, then rolls it back: the stored response goes with it.
 */
@Injectable()
export class RollBackAfterwardsInterceptor implements NestInterceptor {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const rollBack = context.switchToHttp().getRequest<{ headers: Record<string, unknown> }>().headers['x-demo-roll-back'] !== undefined;
    return from(
      this.txHost.withTransaction(async () => {
        const result: unknown = await lastValueFrom(next.handle());
        if (rollBack) throw new Error('demo: the outer transaction rolls back');
        return result;
      }),
    );
  }
}

@Controller('demo/outer')
@UseInterceptors(RollBackAfterwardsInterceptor)
export class OuterTransactionDemoController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  @Post('rolled-back')
  @Idempotent()
  rolledBack(@CurrentClient() client: AuthenticatedClient, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: ResponseHeaders) {
    return createWidget(this.txHost, client, dto, res);
  }
}

@Module({ controllers: [DemoController, OuterTransactionDemoController], providers: [RollBackAfterwardsInterceptor] })
export class DemoModule implements OnModuleInit {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async onModuleInit(): Promise<void> {
    await this.dataSource.query(
      `CREATE TABLE IF NOT EXISTS demo_widgets (
         id uuid PRIMARY KEY DEFAULT gen_random_uuid(), client_id uuid NOT NULL, name text NOT NULL,
         created_at timestamptz NOT NULL DEFAULT now())`,
    );
  }
}
