import { Greeter } from '../vendor/legacy-emitter/index.js';

export default {
  async fetch() {
    const greeter = new Greeter();
    let heard = '';
    greeter.on('greeted', (text) => {
      heard = text;
    });
    const encoded = greeter.greet('node');
    return Response.json({ heard, encoded });
  },
};
