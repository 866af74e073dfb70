// A worker bound to its own entrypoints (docs/bindings.md "Service bindings"): /rpc calls
// methods of the `Admin` WorkerEntrypoint over JS RPC, /admin its fetch, /self the default
// export's fetch through SELF.
import { WorkerEntrypoint } from 'cloudflare:workers';

export class Admin extends WorkerEntrypoint {
  add(a, b) {
    return a + b;
  }

  props() {
    return this.ctx.props;
  }

  async fetch(request) {
    return new Response(`Admin answered ${request.method} ${new URL(request.url).pathname}`);
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/rpc') {
      return Response.json({ sum: await env.ADMIN.add(2, 3), props: await env.ADMIN.props() });
    }
    if (url.pathname === '/admin') {
      const answer = await env.ADMIN.fetch('https://admin.internal/report', { method: 'POST' });
      return new Response(await answer.text(), { status: answer.status });
    }
    if (url.pathname === '/self') {
      const answer = await env.SELF.fetch('https://self.internal/echo?from=self');
      return new Response(`via SELF: ${await answer.text()}`, { status: answer.status });
    }
    if (url.pathname === '/echo') return new Response(`default export answered ${url.search}`);
    return new Response('not found', { status: 404 });
  },
};
