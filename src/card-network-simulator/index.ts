export { RunningSimulator, SimulatorOptions, startCardNetworkSimulator } from './simulator';
