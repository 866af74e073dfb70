// A counter per name: POST /<name> adds one, GET /<name> reads it. Each name is one Durable Object,
// so concurrent increments of one name never lose a count.

import { DurableObject } from 'cloudflare:workers';

export class Counter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      'CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER)',
    );
  }

  increment() {
    return this.ctx.storage.sql
      .exec('INSERT INTO counter (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1 RETURNING n')
      .one().n;
  }

  read() {
    return this.ctx.storage.sql.exec('SELECT n FROM counter').toArray()[0]?.n ?? 0;
  }
}

export default {
  async fetch(request, env) {
    const name = decodeURIComponent(new URL(request.url).pathname.slice(1)) || 'default';
    const counter = env.COUNTER.getByName(name);
    if (request.method === 'POST') return Response.json({ name, count: await counter.increment() });
    if (request.method === 'GET') return Response.json({ name, count: await counter.read() });
    return new Response('GET or POST /<name>\n', { status: 405, headers: { Allow: 'GET, POST' } });
  },
};
