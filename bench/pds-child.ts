// The embedded PDS and PLC directory in a process of their own, for the execution benchmarks: in the bench's
// process they would share its event loop with the supervisor under measurement (50 concurrent resolutions
// starved both), where a real PDS is another machine. Prints one JSON line with the URLs when it listens;
// closes the network and exits when its stdin ends (the bench closed it, or died).
import { startLocalNetwork } from '../src/adapters/atproto/index.ts';

const network = await startLocalNetwork();
process.stdout.write(`${JSON.stringify({ pdsUrl: network.pdsUrl, plcUrl: network.plcUrl })}\n`);
const stop = () => {
  void network.close().finally(() => process.exit(0));
};
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
