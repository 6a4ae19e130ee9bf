/** The documented test key of the bundled card network simulator (not a secret). */
export const DEFAULT_CARD_NETWORK_SECRET = 'sk_test_simulator_0123456789abcdef';
/** The documented webhook signing secret of the bundled simulator (not a secret). */
export const DEFAULT_WEBHOOK_SECRET = 'whsec_simulator_0123456789abcdef';

/** The NODE_ENV values that run without the production rules; any other value gets them (fail closed). */
export const DEVELOPMENT_ENVIRONMENTS: readonly string[] = ['development', 'test'];
