import { Body, Controller, HttpCode, Module, OnModuleInit, Post, Res } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { InjectDataSource } from '@nestjs/typeorm';
import { IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { DataSource } from 'typeorm';
import { CurrentClient } from '../../../src/auth/current-client.decorator';
import type { AuthenticatedClient } from '../../../src/auth/authenticated-client';
import type { ResponseHeaders } from '../../../src/common/http';
import { BusinessOutcomeException } from '../../../src/common/problem';
import { Idempotent } from '../../../src/idempotency/idempotent.decorator';

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

@Controller('demo')
export class DemoController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  private async create(client: AuthenticatedClient, dto: CreateWidgetDto, res: ResponseHeaders) {
    const [row] = await this.txHost.tx.query<{ id: string; created_at: Date }[]>(
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

@Module({ controllers: [DemoController] })
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
