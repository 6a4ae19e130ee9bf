import { Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { InjectDataSource } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { DataSource, EntityManager } from 'typeorm';

/**
 * The module registers nestjs-cls's transactional plugin on the default data
 * source; an app may have registered the same plugin itself. Every plugin of
 * the default connection name keeps its transaction in the same slot of the
 * context, so inside a key's transaction each of their TransactionHosts hands
 * out the module's transaction: right when they are on the same data source,
 * and a write to the wrong database otherwise. The startup stops on the
 * second case, naming the fix.
 */
@Injectable()
export class TransactionsCheck implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {}

  onModuleInit(): void {
    for (const { token, instance } of this.discovery.getProviders()) {
      // A plugin with a connectionName provides its host under another token, and another slot.
      if (token !== TransactionHost || !(instance instanceof TransactionHost)) continue;
      // Outside any context, `tx` is the host's own data source's manager.
      const { connection } = (instance as TransactionHost).tx as EntityManager;
      if (connection !== this.dataSource) {
        throw new Error(
          'IdempotencyModule: a TransactionHost of the app (nestjs-cls transactional plugin) is on another data source than ' +
            "the module's (TypeORM's default), and would hand out the module's transaction: give that plugin a connectionName",
        );
      }
    }
  }
}
