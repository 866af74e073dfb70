// The generated workerd configuration (docs/runtime.md: vars as
// bindings, assets served): user values are embedded from files, never written into it.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { capnpString, renderWorkerdConfig } from './workerd.ts';

describe('workerd config', () => {
  it('quotes Cap’n Proto text safely', () => {
    assert.equal(capnpString('a"b\\c\nd'), '"a\\"b\\\\c\\x0ad"');
  });

  it('embeds modules and vars, and routes through the asset router when there are assets', () => {
    const text = renderWorkerdConfig({
      address: 'unix:/tmp/x.sock',
      modules: [{ name: 'index.js', type: 'esm', file: 'modules/index.js' }],
      compatibilityDate: '2025-06-01',
      compatibilityFlags: ['nodejs_compat'],
      vars: [
        { name: 'GREETING', kind: 'text', file: 'vars/0.txt' },
        { name: 'LIMITS', kind: 'json', file: 'vars/1.json' },
      ],
      assets: { filesJson: 'f.json', configJson: 'c.json', blobsDir: '/b', binding: 'ASSETS' },
    });
    assert.match(text, /\(name = "index\.js", esModule = embed "modules\/index\.js"\)/);
    assert.match(text, /\(name = "GREETING", text = embed "vars\/0\.txt"\)/);
    assert.match(text, /\(name = "LIMITS", json = embed "vars\/1\.json"\)/);
    assert.match(text, /\(name = "ASSETS", service = "cell-assets"\)/);
    assert.match(text, /address = "unix:\/tmp\/x\.sock", http = \(\), service = "cell-router"/);
    assert.match(text, /compatibilityFlags = \[ "nodejs_compat" \]/);
  });

  it('serves the worker directly without assets', () => {
    const text = renderWorkerdConfig({
      address: '127.0.0.1:9000',
      modules: [{ name: 'w.js', type: 'esm', file: 'modules/w.js' }],
      compatibilityDate: '2025-06-01',
      compatibilityFlags: [],
      vars: [],
      assets: null,
    });
    assert.match(text, /service = "cell-user"\) \]/);
    assert.doesNotMatch(text, /cell-router/);
  });
});
