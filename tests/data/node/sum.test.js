const test = require('node:test');
const assert = require('node:assert');
const { sum } = require('../sum');
test('adds two numbers', () => { assert.strictEqual(sum(2, 3), 5); });
test('adds zero', () => { assert.strictEqual(sum(2, 0), 2); });
test.describe('group', () => { test.it('nested adds', () => { assert.strictEqual(sum(1, 1), 2); }); });
