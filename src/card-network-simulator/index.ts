// The simulator's public face: the app (or a test) starts it in its own process
// with startCardNetworkSimulator; main.ts runs the same thing as a separate process.
export { maskSecret, startCardNetworkSimulator } from './simulator';
export type { RunningSimulator, SimulatorFault, SimulatorOptions } from './simulator';
