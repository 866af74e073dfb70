// biome-ignore-all lint/style/useNodejsImportProtocol: bare names on purpose, as CommonJS packages on npm write them
// A CommonJS package as many on npm are: it require()s Node built-ins.
const { EventEmitter } = require('events');
const { Buffer } = require('buffer');
const util = require('util');

class Greeter extends EventEmitter {
  greet(name) {
    const text = util.format('hello %s', name);
    this.emit('greeted', text);
    return Buffer.from(text).toString('base64');
  }
}
module.exports = { Greeter };
