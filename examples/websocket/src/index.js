// An echo WebSocket at /ws and a streamed response at /stream.
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === '/ws') {
      if (request.headers.get('upgrade') !== 'websocket')
        return new Response('expected a WebSocket', { status: 426 });
      const [client, server] = Object.values(new WebSocketPair());
      server.accept();
      server.addEventListener('message', (event) => server.send(`echo: ${event.data}`));
      return new Response(null, { status: 101, webSocket: client });
    }
    if (url.pathname === '/stream') {
      const { readable, writable } = new TransformStream();
      const writer = writable.getWriter();
      const encoder = new TextEncoder();
      (async () => {
        for (let i = 1; i <= 3; i++) await writer.write(encoder.encode(`chunk ${i}\n`));
        await writer.close();
      })();
      return new Response(readable, { headers: { 'content-type': 'text/plain' } });
    }
    return new Response('try /ws or /stream\n');
  },
};
