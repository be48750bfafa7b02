/** A TCP proxy in front of the test daphne that can drop every open connection at once, as a
 * network failure would (no close frame). */
import { createConnection, createServer, type Server, type Socket } from "node:net";

export class CuttingProxy {
  connections = 0;
  private readonly live = new Set<Socket>();
  private readonly server: Server;
  port = 0;

  constructor(private readonly upstreamPort: number) {
    this.server = createServer((client) => {
      this.connections++;
      const upstream = createConnection({ host: "127.0.0.1", port: this.upstreamPort });
      for (const socket of [client, upstream]) {
        this.live.add(socket);
        socket.on("error", () => socket.destroy());
        socket.on("close", () => this.live.delete(socket));
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((done) => this.server.listen(0, "127.0.0.1", done));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  get ws(): string {
    return `ws://127.0.0.1:${this.port}`;
  }

  cut(): void {
    for (const socket of this.live) socket.destroy();
    this.live.clear();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((done) => this.server.close(() => done()));
  }
}

/** A TCP proxy whose first connection is dropped once it has passed `budget` bytes towards the
 * server (mid-body: a network failure in the middle of an upload); the others pass. */
export class BudgetProxy {
  cuts = 0;
  connections = 0;
  private readonly server: Server;
  port = 0;

  constructor(
    private readonly upstreamPort: number,
    private readonly budget: number,
  ) {
    this.server = createServer((client) => {
      this.connections++;
      const first = this.connections === 1;
      const upstream = createConnection({ host: "127.0.0.1", port: this.upstreamPort });
      for (const socket of [client, upstream]) socket.on("error", () => socket.destroy());
      upstream.pipe(client);
      let passed = 0;
      client.on("data", (chunk: Buffer) => {
        if (!first) return void upstream.write(chunk);
        if (passed >= this.budget) return;
        upstream.write(chunk);
        passed += chunk.length;
        if (passed >= this.budget) {
          this.cuts++;
          client.destroy();
          upstream.destroy();
        }
      });
      client.on("end", () => upstream.end());
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((done) => this.server.listen(0, "127.0.0.1", done));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  get base(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async close(): Promise<void> {
    await new Promise<void>((done) => this.server.close(() => done()));
  }
}
