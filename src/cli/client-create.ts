import { ClientsService } from '../auth/clients.service';
import { violatedConstraint } from '../database/database-errors';
import { runWithAppContext } from './with-app-context';

/**
 * `npm run client:create -- <name>`: creates an API client and prints its key.
 * This is the only time the key exists in clear: only its SHA-256 is stored.
 */
const name = process.argv[2]?.trim();
if (!name || !/^[\w.-]{1,64}$/.test(name)) {
  console.error('usage: npm run client:create -- <name>   (letters, digits, . _ -; at most 64)');
  process.exit(2);
}

runWithAppContext('client:create', async (context) => {
  try {
    const { client, apiKey } = await context.get(ClientsService).create(name);
    console.log(`created client "${client.name}" (${client.id})`);
    console.log(`API key (shown once, store it now): ${apiKey}`);
  } catch (error) {
    if (violatedConstraint(error) === 'clients_name_key') throw new Error(`a client named "${name}" already exists`, { cause: error });
    throw error;
  }
});
