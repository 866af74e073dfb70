import { convert } from './convert.js';
import { route } from './router.js';

export default {
  async fetch(request, env) {
    return route(request, {
      '/convert': (url) => Response.json(convert(Number(url.searchParams.get('f') ?? 32), env.UNIT)),
    });
  },
};
