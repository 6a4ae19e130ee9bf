import { ClientsService } from '../auth/clients.service';
import { runWithAppContext } from './with-app-context';

/**
 * `npm run client:rotate -- <name>`: adds a new API key to the client and prints
 * it once (only its SHA-256 is stored). Its other keys stay valid until
 * `client:revoke`: deploy the new key, then revoke the old one.
 */
const name = process.argv[2]?.trim();
if (!name) {
  console.error('usage: npm run client:rotate -- <name>');
  process.exit(2);
}

runWithAppContext('client:rotate', async (context) => {
  const { client, apiKey, key } = await context.get(ClientsService).rotate(name);
  console.log(`added key ${key.id} (prefix ${key.prefix}) to client "${client.name}"; its other keys stay valid until revoked`);
  console.log(`API key (shown once, store it now): ${apiKey}`);
});
