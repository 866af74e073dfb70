// The console's one template function (docs/console.md "How it is built"): values are escaped,
// markup built by it is not escaped twice, and JSON blocks cannot close their script element.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { escapeHtml, html, jsonBlock } from './html.ts';

test('interpolated values are escaped; nested markup, arrays and empty values as expected', () => {
  const name = `<img src=x onerror="alert('1')">&`;
  assert.equal(
    html`<td title="${name}">${name}</td>`.text,
    '<td title="&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt;&amp;">&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt;&amp;</td>',
  );
  assert.equal(html`<p>${html`<b>${'a<b'}</b>`}</p>`.text, '<p><b>a&lt;b</b></p>');
  assert.equal(html`${['<', html`<i>`, 2]}`.text, '&lt;<i>2');
  assert.equal(html`[${null}${undefined}${false}${0}]`.text, '[0]');
  assert.equal(escapeHtml('plain'), 'plain');
});

test('a JSON block cannot end its script element', () => {
  const text = jsonBlock({ detail: '</script><script>alert(1)</script>' }).text;
  assert.ok(!text.includes('</script>'));
  assert.deepEqual(JSON.parse(text), { detail: '</script><script>alert(1)</script>' });
});
