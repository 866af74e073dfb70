export function route(request, table) {
  const url = new URL(request.url);
  const handler = table[url.pathname];
  return handler ? handler(url) : new Response('not found', { status: 404 });
}
