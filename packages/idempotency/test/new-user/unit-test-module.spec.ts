import { Body, Controller, Injectable, Module, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Idempotent } from 'safe-retries';

/**
 * Nest's standard unit test of a controller with `@Idempotent()` routes, as a
 * user writes it: no IdempotencyModule, no database, the method called directly.
 */
@Injectable()
class OrdersService {
  create(dto: { item: string }): { id: number; item: string } {
    return { id: 1, item: dto.item };
  }
}

@Controller('orders')
class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  @Post()
  @Idempotent()
  create(@Body() dto: { item: string }): { id: number; item: string } {
    return this.orders.create(dto);
  }
}

describe('a controller with @Idempotent() routes', () => {
  it('compiles in a testing module without IdempotencyModule, and its method runs', async () => {
    const moduleRef = await Test.createTestingModule({ controllers: [OrdersController], providers: [OrdersService] }).compile();
    expect(moduleRef.get(OrdersController).create({ item: 'tea' })).toEqual({ id: 1, item: 'tea' });
    await moduleRef.close();
  });

  it('stops an app that forgot IdempotencyModule at startup, naming the fix', async () => {
    @Module({ controllers: [OrdersController], providers: [OrdersService] })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await expect(app.init()).rejects.toThrow(/@Idempotent\(\) routes need IdempotencyModule: import IdempotencyModule.forRoot/);
    await app.close();
  });
});
