import { ClientsService } from '../auth/clients.service';
import { runWithAppContext } from './with-app-context';

/**
 * `npm run client:revoke -- <name> <key prefix or key id>`: revokes exactly one
 * active key of the client (see `client:keys`). No match, or a prefix shared by
 * several keys (their ids are listed): exit 1, nothing revoked. Every instance
 * refuses the key within 5 s.
 */
const [name, ref] = process.argv.slice(2).map((a) => a.trim());
if (!name || !ref) {
  console.error('usage: npm run client:revoke -- <name> <key prefix or key id>   (see npm run client:keys -- <name>)');
  process.exit(2);
}

runWithAppContext('client:revoke', async (context) => {
  const key = await context.get(ClientsService).revoke(name, ref);
  console.log(`revoked key ${key.id} (prefix ${key.prefix ?? 'unknown'}) of client "${name}" at ${key.revokedAt?.toISOString()}; every instance refuses it within 5 s`);
});
