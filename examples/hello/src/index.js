// Answers every request the static assets do not: the greeting from the config's vars.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/') {
      return new Response(`${env.GREETING}!\nA static asset lives at /hello.txt\n`, {
        headers: { 'content-type': 'text/plain; charset=utf-8' },
      });
    }
    return new Response(`Nothing at ${url.pathname}\n`, { status: 404 });
  },
};
