import { Hono } from 'hono';

const app = new Hono();
app.get('/', (c) => c.text('Hello Hono!'));
app.get('/users/:id', (c) => c.json({ id: c.req.param('id') }));

export default app;
