import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { AppModule } from './app.module';

async function bootstrap(): Promise<void> {
  if (!process.env.DATABASE_URL) throw new Error('DATABASE_URL is not set (postgres://user:password@host:5432/database)');
  const app = await NestFactory.create<NestExpressApplication>(AppModule);
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3003);
  await app.listen(port, '127.0.0.1');
  console.log(`express-ledger listening on http://127.0.0.1:${port}`);
}

void bootstrap();
