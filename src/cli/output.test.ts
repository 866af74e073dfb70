import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatBytes, table } from './output.ts';

test('table pads every column but the last to its widest cell, two spaces apart', () => {
  assert.deepEqual(
    table(
      ['NAME', 'KEY', 'ENDPOINTS'],
      [
        ['default', 'op-1', 'http://a,http://b'],
        ['x', 'op-longer-id', '-'],
      ],
    ),
    [
      'NAME     KEY           ENDPOINTS',
      'default  op-1          http://a,http://b',
      'x        op-longer-id  -',
    ],
  );
});

test('table lines never end in blanks, even when the last cell is empty', () => {
  const lines = table(['', 'DEPLOYMENT', 'SOURCE'], [['*', 'd1', '']]);
  assert.deepEqual(lines, ['   DEPLOYMENT  SOURCE', '*  d1']);
});

test('table of no rows is its header', () => {
  assert.deepEqual(table(['ID', 'ROLE'], []), ['ID  ROLE']);
});

test('formatBytes switches unit at 1 KiB and 1 MiB', () => {
  assert.equal(formatBytes(0), '0 B');
  assert.equal(formatBytes(1023), '1023 B');
  assert.equal(formatBytes(1024), '1.0 KiB');
  assert.equal(formatBytes(1536), '1.5 KiB');
  assert.equal(formatBytes(1024 * 1024), '1.0 MiB');
  assert.equal(formatBytes(5 * 1024 * 1024 + 512 * 1024), '5.5 MiB');
});
