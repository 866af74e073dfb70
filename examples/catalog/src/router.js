// A tiny method-and-path router: patterns such as `/api/products/:id`.
export class Router {
  #routes = [];

  add(method, pattern, handler) {
    const names = [];
    const source = pattern.replace(/:([a-z]+)/g, (_, name) => {
      names.push(name);
      return '([^/]+)';
    });
    this.#routes.push({ method, regex: new RegExp(`^${source}$`), names, handler });
    return this;
  }

  async handle(request, env) {
    const url = new URL(request.url);
    let pathMatched = false;
    for (const route of this.#routes) {
      const match = route.regex.exec(url.pathname);
      if (!match) continue;
      pathMatched = true;
      if (route.method !== request.method) continue;
      const params = Object.fromEntries(
        route.names.map((name, i) => [name, decodeURIComponent(match[i + 1])]),
      );
      return route.handler({ request, env, url, params });
    }
    return pathMatched ? json({ error: 'method not allowed' }, 405) : json({ error: 'not found' }, 404);
  }
}

export function json(value, status = 200) {
  return new Response(JSON.stringify(value), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8' },
  });
}
