import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { AppModule } from './app.module';

async function bootstrap(): Promise<void> {
  // rawBody: the signature is over the bytes received; a parsed and re-serialised body would not verify.
  const app = await NestFactory.create<NestExpressApplication>(AppModule, { rawBody: true });
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3002);
  await app.listen(port, '127.0.0.1');
  console.log(`webhook-consumer listening on http://127.0.0.1:${port}/webhooks`);
}

void bootstrap();
