// A small authoritative DNS server on loopback UDP for tests of the CLI's DNS check (docs/applications.md
// "Custom domains"). It answers A, AAAA and CNAME from a table the test edits, follows CNAMEs inside the
// table as a recursive resolver would, and says NXDOMAIN for names it does not know.

import { createSocket, type Socket } from 'node:dgram';

export interface DnsEntry {
  a?: string[];
  aaaa?: string[];
  cname?: string;
}

export interface DnsServer {
  /** `127.0.0.1:<port>`, for `SVC_DNS_SERVER`. */
  address: string;
  /** Names (lowercase, no trailing dot) to what they answer; `*.<base>` matches one label or more. */
  records: Map<string, DnsEntry>;
  close(): Promise<void>;
}

const TYPE = { A: 1, CNAME: 5, AAAA: 28 } as const;

export async function startDnsServer(records: Record<string, DnsEntry> = {}): Promise<DnsServer> {
  const table = new Map(Object.entries(records));
  const socket: Socket = createSocket('udp4');
  socket.on('message', (message, peer) => {
    try {
      socket.send(answer(message, table), peer.port, peer.address);
    } catch {
      // A malformed query gets no answer, as from a real server that drops it.
    }
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  return {
    address: `127.0.0.1:${port}`,
    records: table,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}

function lookup(table: Map<string, DnsEntry>, name: string): DnsEntry | undefined {
  const exact = table.get(name);
  if (exact) return exact;
  for (let at = name.indexOf('.'); at !== -1; at = name.indexOf('.', at + 1)) {
    const wild = table.get(`*${name.slice(at)}`);
    if (wild) return wild;
  }
  return undefined;
}

function answer(query: Buffer, table: Map<string, DnsEntry>): Buffer {
  const id = query.readUInt16BE(0);
  let offset = 12;
  const labels: string[] = [];
  while (query[offset]! > 0) {
    const length = query[offset]!;
    labels.push(query.subarray(offset + 1, offset + 1 + length).toString('ascii'));
    offset += length + 1;
  }
  offset += 1;
  const qtype = query.readUInt16BE(offset);
  const question = query.subarray(12, offset + 4);
  const name = labels.join('.').toLowerCase();

  const answers: Buffer[] = [];
  let current = name;
  let entry = lookup(table, current);
  const known = entry !== undefined;
  // Follow CNAMEs for address queries, as a recursive resolver hands them back.
  for (let hops = 0; entry?.cname && qtype !== TYPE.CNAME && hops < 8; hops++) {
    answers.push(record(current, TYPE.CNAME, encodeName(entry.cname)));
    current = entry.cname.toLowerCase().replace(/\.$/, '');
    entry = lookup(table, current);
  }
  if (entry) {
    if (qtype === TYPE.CNAME && entry.cname)
      answers.push(record(current, TYPE.CNAME, encodeName(entry.cname)));
    if (qtype === TYPE.A) for (const ip of entry.a ?? []) answers.push(record(current, TYPE.A, ipv4(ip)));
    if (qtype === TYPE.AAAA)
      for (const ip of entry.aaaa ?? []) answers.push(record(current, TYPE.AAAA, ipv6(ip)));
  }
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  // QR, AA, RD, RA; NXDOMAIN (3) when the name is unknown.
  header.writeUInt16BE(0x8580 | (known ? 0 : 3), 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(answers.length, 6);
  return Buffer.concat([header, question, ...answers]);
}

function record(name: string, type: number, data: Buffer): Buffer {
  const fixed = Buffer.alloc(10);
  fixed.writeUInt16BE(type, 0);
  fixed.writeUInt16BE(1, 2);
  fixed.writeUInt32BE(5, 4);
  fixed.writeUInt16BE(data.length, 8);
  return Buffer.concat([encodeName(name), fixed, data]);
}

function encodeName(name: string): Buffer {
  const parts = name.replace(/\.$/, '').split('.').filter(Boolean);
  return Buffer.concat([
    ...parts.map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p, 'ascii')])),
    Buffer.from([0]),
  ]);
}

function ipv4(ip: string): Buffer {
  return Buffer.from(ip.split('.').map(Number));
}

function ipv6(ip: string): Buffer {
  const [head, tail] = ip.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => {
    out.writeUInt16BE(Number.parseInt(g || '0', 16), i * 2);
  });
  return out;
}
