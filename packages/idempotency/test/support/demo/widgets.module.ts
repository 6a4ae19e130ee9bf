import {
  BadRequestException,
  Body,
  CallHandler,
  Controller,
  ExecutionContext,
  HttpCode,
  HttpException,
  Injectable,
  Module,
  NestInterceptor,
  OnModuleInit,
  Post,
  Req,
  Res,
  UseInterceptors,
  UsePipes,
  ValidationPipe,
} from '@nestjs/common';
import { Observable, from, lastValueFrom } from 'rxjs';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { DataSource } from 'typeorm';
import { HttpResponse, IDEMPOTENT_OUTCOME, Idempotent, IdempotentOutcome, Operation, OutcomeResponse, PhasedOperation } from 'safe-retries';
import { HeaderRequest, principal } from '../library-app';

/**
 * A small demo feature for the module's e2e tests, mounted next to the library
 * demo (createLibraryApp's `imports`): it writes a row of the principal's
 * through the ambient transaction, optionally sleeps (a slow worker), and fails
 * on demand (an unexpected error, or a business outcome that is stored). Its
 * body is validated by class-validator (a 400 after the claim).
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

/** A business outcome, as the README's CardDeclined: answered 402, and stored and replayed byte for byte. */
export class Declined extends HttpException implements IdempotentOutcome {
  constructor(detail: string) {
    super({ code: 'card_declined', title: 'Card Declined', detail }, 402);
  }

  [IDEMPOTENT_OUTCOME](): OutcomeResponse {
    return { status: 402, contentType: 'application/json; charset=utf-8', body: JSON.stringify(this.getResponse()) };
  }
}

/** Whitelisted fields only; a refusal names the fields at fault. */
const validation = new ValidationPipe({
  whitelist: true,
  forbidNonWhitelisted: true,
  exceptionFactory: (errors) => new BadRequestException({ code: 'validation_failed', fields: errors.map((e) => e.property) }),
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Writes a widget through the ambient transaction; sleeps and fails as the body asks. */
async function createWidget(txHost: TransactionHost<TransactionalAdapterTypeOrm>, req: HeaderRequest, dto: CreateWidgetDto, res: unknown) {
  const [row] = await txHost.tx.query<{ id: string; created_at: Date }[]>('INSERT INTO demo_widgets (scope, name) VALUES ($1, $2) RETURNING id, created_at', [
    principal(req),
    dto.name,
  ]);
  if (dto.delay_ms) await sleep(dto.delay_ms);
  if (dto.fail === 'boom') throw new Error('demo: unexpected failure');
  if (dto.fail === 'declined') throw new Declined(`widget ${row.id} declined`);
  HttpResponse.of(res).setHeader('Location', `/demo/widgets/${row.id}`);
  return { id: row.id, name: dto.name, zeta: 1, alpha: 2, created_at: row.created_at };
}

@Controller('demo')
@UsePipes(validation)
export class DemoController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  private create(req: HeaderRequest, dto: CreateWidgetDto, res: unknown) {
    return createWidget(this.txHost, req, dto, res);
  }

  @Post('widgets')
  @Idempotent()
  widgets(@Req() req: HeaderRequest, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: unknown) {
    return this.create(req, dto, res);
  }

  @Post('short-lease')
  @Idempotent({ lease: '300ms' })
  shortLease(@Req() req: HeaderRequest, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: unknown) {
    return this.create(req, dto, res);
  }

  @Post('short-retention')
  @Idempotent({ lease: '500ms', retention: '1500ms' })
  shortRetention(@Req() req: HeaderRequest, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: unknown) {
    return this.create(req, dto, res);
  }

  @Post('waiting')
  @Idempotent({ wait: '5s' })
  waiting(@Req() req: HeaderRequest, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: unknown) {
    return this.create(req, dto, res);
  }

  @Post('short-wait')
  @Idempotent({ wait: '300ms' })
  shortWait(@Req() req: HeaderRequest, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: unknown) {
    return this.create(req, dto, res);
  }

  @Post('optional')
  @Idempotent({ required: false })
  optional(@Req() req: HeaderRequest, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: unknown) {
    return this.create(req, dto, res);
  }

  /** Phased: the row in a first phase, then the response (or the business outcome) stored by finish(). */
  @Post('phased')
  @Idempotent({ phased: 'demo-widget' })
  async phased(@Req() req: HeaderRequest, @Body() dto: CreateWidgetDto, @Operation() op: PhasedOperation<{ id: string }>) {
    const id =
      op.state?.id ??
      (await op.checkpoint(
        'inserted',
        async () =>
          (await this.txHost.tx.query<{ id: string }[]>('INSERT INTO demo_widgets (scope, name) VALUES ($1, $2) RETURNING id', [principal(req), dto.name]))[0].id,
        (rowId) => ({ id: rowId }),
      ));
    return op.finish(
      async () => {
        if (dto.fail === 'declined') throw new Declined(`widget ${id} declined`);
        return { id, name: dto.name, phased: true };
      },
      { location: (r) => `/demo/widgets/${r.id}` },
    );
  }

  @Post('accepted')
  @HttpCode(202)
  @Idempotent({ fingerprint: (req: { body?: unknown }) => ({ ...(req.body as object), client_ts: undefined }) })
  accepted(@Req() req: HeaderRequest, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: unknown) {
    return this.create(req, dto, res);
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
    const rollBack = context.switchToHttp().getRequest<HeaderRequest>().headers['x-demo-roll-back'] !== undefined;
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
@UsePipes(validation)
export class OuterTransactionDemoController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  @Post('rolled-back')
  @Idempotent()
  rolledBack(@Req() req: HeaderRequest, @Body() dto: CreateWidgetDto, @Res({ passthrough: true }) res: unknown) {
    return createWidget(this.txHost, req, dto, res);
  }
}

/** The widget routes under /demo, and their table, demo_widgets. */
@Module({ controllers: [DemoController, OuterTransactionDemoController], providers: [RollBackAfterwardsInterceptor] })
export class DemoModule implements OnModuleInit {
  constructor(private readonly dataSource: DataSource) {}

  async onModuleInit(): Promise<void> {
    await this.dataSource.query(
      `CREATE TABLE IF NOT EXISTS demo_widgets (
         id uuid PRIMARY KEY DEFAULT gen_random_uuid(), scope text NOT NULL, name text NOT NULL,
         created_at timestamptz NOT NULL DEFAULT now())`,
    );
  }
}
