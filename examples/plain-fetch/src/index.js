export default {
  async fetch(request) {
    const url = new URL(request.url);
    return Response.json({ hello: 'world', path: url.pathname, method: request.method });
  },
};
