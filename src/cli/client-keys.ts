import { ClientsService } from '../auth/clients.service';
import { runWithAppContext } from './with-app-context';

/**
 * `npm run client:keys -- <name>`: the client's keys, oldest first: id, prefix,
 * created_at, revoked_at (never a secret: only hashes are stored).
 */
const name = process.argv[2]?.trim();
if (!name) {
  console.error('usage: npm run client:keys -- <name>');
  process.exit(2);
}

runWithAppContext('client:keys', async (context) => {
  const keys = await context.get(ClientsService).keys(name);
  console.log(['id', 'prefix', 'created_at', 'revoked_at'].join('\t'));
  for (const key of keys) {
    console.log([key.id, key.prefix ?? '(unknown)', key.createdAt.toISOString(), key.revokedAt?.toISOString() ?? '-'].join('\t'));
  }
});
