import page from './page.tmpl';
import schema from './schema.sql';

export default {
  async fetch() {
    return Response.json({ schema: schema.trim(), page: page.replace('{{greeting}}', 'hi').trim() });
  },
};
