// Sends what /send names to the queue `jobs`, and records every delivery of the queue handler in
// KV under `<queue>/<key>/<attempts>`, which /seen lists.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/send') {
      const key = url.searchParams.get('key') ?? 'none';
      const body = { key, sent: Date.now(), fail: url.searchParams.has('fail') };
      const delaySeconds = Number(url.searchParams.get('delay') ?? 0);
      await env.JOBS.send(body, delaySeconds > 0 ? { delaySeconds } : {});
      return Response.json({ sent: key });
    }
    if (url.pathname === '/send-batch') {
      const keys = (url.searchParams.get('keys') ?? '').split(',').filter(Boolean);
      await env.JOBS.sendBatch(keys.map((key) => ({ body: { key, sent: Date.now(), fail: false } })));
      return Response.json({ sent: keys });
    }
    if (url.pathname === '/seen') {
      const seen = {};
      let cursor;
      do {
        const page = await env.SEEN.list({ cursor });
        for (const k of page.keys) seen[k.name] = JSON.parse(await env.SEEN.get(k.name));
        cursor = page.list_complete ? undefined : page.cursor;
      } while (cursor);
      return Response.json(seen);
    }
    return new Response('not found', { status: 404 });
  },

  async queue(batch, env) {
    for (const message of batch.messages) {
      const { key, sent, fail } = message.body;
      await env.SEEN.put(
        `${batch.queue}/${key}/${message.attempts}`,
        JSON.stringify({
          id: message.id,
          sent,
          delivered: Date.now(),
          timestamp: message.timestamp.getTime(),
        }),
      );
      if (fail && batch.queue === 'jobs') message.retry();
      else message.ack();
    }
  },
};
