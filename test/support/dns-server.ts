import { Socket, createSocket } from 'node:dgram';
import { AddressInfo } from 'node:net';
import ipaddr from 'ipaddr.js';

const A = 1;
const AAAA = 28;

/**
 * A DNS server on a loopback UDP port for a test: answers the A and AAAA
 * questions of the names in `records` with their addresses (a name it does
 * not know: NXDOMAIN), and never answers a name under `silent`. Counts the
 * questions it was asked, by name.
 */
export class DnsServer {
  readonly asked = new Map<string, number>();
  private socket?: Socket;

  constructor(
    private readonly records: Record<string, string[]>,
    private readonly silent = '.never-answers.test',
  ) {}

  /** `host:port`, for a Resolver's setServers. */
  get address(): string {
    const { address, port } = this.socket!.address() as AddressInfo;
    return `${address}:${port}`;
  }

  async start(): Promise<void> {
    this.socket = createSocket('udp4');
    this.socket.on('message', (query, from) => {
      const answer = this.answer(query);
      if (answer) this.socket!.send(answer, from.port, from.address);
    });
    await new Promise<void>((resolve) => this.socket!.bind(0, '127.0.0.1', resolve));
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.socket?.close(() => resolve()) ?? resolve());
  }

  private answer(query: Buffer): Buffer | undefined {
    const labels: string[] = [];
    let at = 12;
    while (query[at] !== 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]).toString('ascii'));
      at += query[at] + 1;
    }
    const name = labels.join('.').toLowerCase();
    const type = query.readUInt16BE(at + 1);
    const question = query.subarray(12, at + 5);
    this.asked.set(name, (this.asked.get(name) ?? 0) + 1);
    if (name.endsWith(this.silent)) return undefined;
    const known = this.records[name];
    const rdatas = (known ?? [])
      .map((address) => ipaddr.parse(address))
      .filter((parsed) => (type === AAAA ? parsed.kind() === 'ipv6' : type === A && parsed.kind() === 'ipv4'))
      .map((parsed) => Buffer.from(parsed.toByteArray()));
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2); // the id
    header.writeUInt16BE(0x8180 | (known ? 0 : 3), 2); // a response, recursion available; NXDOMAIN for a name it does not know
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(rdatas.length, 6);
    const answers = rdatas.map((rdata) => {
      const record = Buffer.alloc(12);
      record.writeUInt16BE(0xc00c, 0); // the question's name
      record.writeUInt16BE(type, 2);
      record.writeUInt16BE(1, 4); // IN
      record.writeUInt32BE(60, 6);
      record.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([record, rdata]);
    });
    return Buffer.concat([header, question, ...answers]);
  }
}
