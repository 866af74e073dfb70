// The catalog API. Static files in public/ answer first; everything else lands here.
import { products } from './products.js';
import { json, Router } from './router.js';

const router = new Router()
  .add('GET', '/api', ({ env }) => json({ store: env.STORE_NAME, features: env.FEATURES }))
  .add('GET', '/api/products', ({ env, url }) => {
    const size = Number(env.FEATURES?.pageSize ?? 10);
    const page = Math.max(1, Number(url.searchParams.get('page') ?? '1') || 1);
    const items = products.slice((page - 1) * size, page * size);
    return json({ page, pages: Math.ceil(products.length / size), items });
  })
  .add('GET', '/api/products/:id', ({ params }) => {
    const product = products.find((p) => p.id === params.id);
    return product ? json(product) : json({ error: `no product ${params.id}` }, 404);
  })
  .add('GET', '/api/search', ({ env, url }) => {
    if (!env.FEATURES?.search) return json({ error: 'search is turned off' }, 404);
    const q = (url.searchParams.get('q') ?? '').toLowerCase();
    return json({ q, items: products.filter((p) => p.name.toLowerCase().includes(q) || p.tags.includes(q)) });
  })
  .add('POST', '/api/quote', async ({ request }) => {
    let body;
    try {
      body = await request.json();
    } catch {
      return json({ error: 'send a JSON body such as {"items":[{"id":"p-1","quantity":2}]}' }, 400);
    }
    const lines = [];
    for (const { id, quantity } of Array.isArray(body?.items) ? body.items : []) {
      const product = products.find((p) => p.id === id);
      if (!product || !Number.isInteger(quantity) || quantity < 1)
        return json({ error: `bad item ${id}` }, 400);
      lines.push({ id, quantity, total: product.price * quantity });
    }
    return json({ lines, total: lines.reduce((sum, line) => sum + line.total, 0) });
  });

export default {
  fetch(request, env) {
    return router.handle(request, env);
  },
};
