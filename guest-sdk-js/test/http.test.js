// The JavaScript SDK's async commands and `httpGet` under node: real
// servers on 127.0.0.1 for answers, sizes and a refused connection. Inside
// the component, the host's refusal reaches the plugin as StarlingMonkey's
// error (what the engine throws when `outgoing-handler.handle` returns an
// error, seen in the component and read in its source); those tests give
// node's `fetch` that error, and the end-to-end test
// `a_new_javascript_project_fetches_from_an_allowed_host` sees the real one.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';

import { Fail, MAX_REQUESTS_IN_FLIGHT, definePlugin, fail, fetchError, httpGet, originOf, trimEnd } from '../envhost-plugin.js';

/** StarlingMonkey's rejection for a request the host refused before
 * sending it (`fetch_https` reports the host call's failure without its
 * error code). */
const HOST_REFUSED = () => new Error('fetch_https: An error occurred while using the host API.\n');

/** A server on 127.0.0.1 answering `handler`; its base URL. */
async function serve(t, handler) {
  const server = createServer(handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${server.address().port}`;
}

/** A port on 127.0.0.1 nothing listens on. */
async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Runs `body` with the global `fetch` replaced. */
async function withFetch(replacement, body) {
  const original = globalThis.fetch;
  globalThis.fetch = replacement;
  try {
    return await body();
  } finally {
    globalThis.fetch = original;
  }
}

const rejectsWith = (promise, message) => assert.rejects(promise, (error) => error instanceof Fail && error.message === message);

test('an async command answers when its promise settles, and the state is snapshotted after it', async () => {
  const { environment, state } = definePlugin({
    summary: 's',
    state: { n: 0 },
    commands: [
      { signature: 'later', description: 'x', run: async (call, self) => { await new Promise((r) => setTimeout(r, 5)); self.state.n += 1; return `n=${self.state.n}`; } },
      { signature: 'refuse', description: 'x', run: async () => { await null; fail('no, later'); } },
      { signature: 'wrong', description: 'x', run: async () => 42 },
      { signature: 'bug', description: 'x', run: async () => { await null; throw new RangeError('a bug'); } },
      { signature: 'now', description: 'x', run: () => 'sync' },
    ],
  });
  assert.deepEqual(environment.handleCommand('now'), { output: 'sync', success: true }, 'a sync command answers at once, not with a promise');
  const answer = environment.handleCommand('later');
  assert.equal(typeof answer.then, 'function');
  assert.deepEqual(await answer, { output: 'n=1', success: true });
  assert.deepEqual(JSON.parse(new TextDecoder().decode(state.snapshot())), { n: 1 });
  assert.deepEqual(await environment.handleCommand('refuse'), { output: 'no, later', success: false });
  assert.match((await environment.handleCommand('wrong')).output, /^the plugin's command `wrong` returned a number 42/);
  await assert.rejects(environment.handleCommand('bug'), RangeError, 'a bug traps: the host restores the last snapshot');
});

test('an async screen is named as a mistake', () => {
  const screen = definePlugin({ summary: 's', commands: [], screen: async () => 'x' }).environment.getScreen();
  assert.match(screen.content, /^screen\(\) returned a Promise; only commands may be async/);
});

test('httpGet reads the answer of a real server, whatever its status', async (t) => {
  const base = await serve(t, (request, response) => {
    if (request.url === '/hello') response.end('hello \u00e9\xff\n');
    else response.writeHead(404).end('no such page');
  });
  const hello = await httpGet(`${base}/hello`);
  assert.equal(hello.status, 200);
  assert.equal(hello.body.length, Buffer.byteLength('hello \u00e9\xff\n'));
  assert.equal(hello.text(), 'hello \u00e9\xff\n');
  const missing = await httpGet(`${base}/nope`);
  assert.equal(missing.status, 404);
  assert.equal(missing.text(), 'no such page');
});

test('a body larger than the bound fails, declared or streamed', async (t) => {
  const base = await serve(t, (request, response) => {
    if (request.url === '/declared') {
      response.writeHead(200, { 'content-length': 2000 }).end('x'.repeat(2000));
    } else {
      // Chunked: no length to read first.
      response.write('x'.repeat(600));
      response.end('x'.repeat(600));
    }
  });
  const url = `${base}/declared`;
  await rejectsWith(httpGet(url, { maxBytes: 1024 }), `cannot fetch ${url}: its body is larger than 1 KiB, the most this plugin keeps`);
  const streamed = `${base}/streamed`;
  await rejectsWith(httpGet(streamed, { maxBytes: 1024 }), `cannot fetch ${streamed}: its body is larger than 1 KiB, the most this plugin keeps`);
  assert.equal((await httpGet(streamed, { maxBytes: 1200 })).body.length, 1200);
});

test('no connection is said as such, not as a missing grant', async () => {
  const url = `http://127.0.0.1:${await closedPort()}/x`;
  await assert.rejects(httpGet(url), (error) => {
    assert.ok(error instanceof Fail);
    assert.match(error.message, /^cannot fetch http:\/\/127\.0\.0\.1:\d+\/x: no response \(ECONNREFUSED\): the connection failed/);
    assert.doesNotMatch(error.message, /allowed-hosts/);
    return true;
  });
  // StarlingMonkey's words for it (it gives no code).
  assert.equal(
    fetchError('http://a.org/', new TypeError('NetworkError when attempting to fetch resource')).message,
    'cannot fetch http://a.org/: no response: the connection failed, the name is unknown or it timed out',
  );
});

test("the host's refusal names the origin to grant, in the grant's syntax", async () => {
  await withFetch(
    () => Promise.reject(HOST_REFUSED()),
    async () => {
      for (const [url, origin] of [
        ['http://127.0.0.1:9/', 'http://127.0.0.1:9'],
        ['https://Example.COM:443/a?b#c', 'https://example.com'],
        ['http://example.com:80', 'http://example.com'],
        ['https://example.com:8443/', 'https://example.com:8443'],
        ['http://[::1]:3000/', 'http://[::1]:3000'],
      ]) {
        await rejectsWith(httpGet(url), `cannot fetch ${url}: ask the operator to add "${origin}" to allowed-hosts in env/envhost.toml`);
      }
    },
  );
  assert.equal(
    fetchError('http://127.0.0.1:9/', HOST_REFUSED()).message,
    'cannot fetch http://127.0.0.1:9/: ask the operator to add "http://127.0.0.1:9" to allowed-hosts in env/envhost.toml',
  );
});

test('a refusal while the most requests are in flight says so, not a missing grant', async () => {
  const pending = [];
  await withFetch(
    () => {
      if (pending.length < MAX_REQUESTS_IN_FLIGHT) {
        return new Promise((resolve) => pending.push(() => resolve(new Response('ok'))));
      }
      return Promise.reject(HOST_REFUSED());
    },
    async () => {
      const held = Array.from({ length: MAX_REQUESTS_IN_FLIGHT }, (_, i) => httpGet(`https://example.com/${i}`));
      await rejectsWith(
        httpGet('https://example.com/9'),
        'cannot fetch https://example.com/9: 8 requests are already in flight, the most a plugin may have at once; send this one when one of them has ended',
      );
      for (const release of pending) release();
      assert.deepEqual((await Promise.all(held)).map((r) => r.text()), Array(MAX_REQUESTS_IN_FLIGHT).fill('ok'));
      // All ended: a refusal now is the grant's.
      await rejectsWith(httpGet('https://example.com/10'), 'cannot fetch https://example.com/10: ask the operator to add "https://example.com" to allowed-hosts in env/envhost.toml');
    },
  );
});

test('URLs that cannot be fetched are refused before any request', async () => {
  await withFetch(
    () => assert.fail('nothing is sent'),
    async () => {
      await rejectsWith(httpGet('example.com/x'), 'cannot fetch example.com/x: a URL starts with http:// or https://');
      await rejectsWith(httpGet('ftp://example.com/'), 'cannot fetch ftp://example.com/: only http:// and https:// URLs can be fetched');
      await rejectsWith(httpGet('file:///etc/passwd'), 'cannot fetch file:///etc/passwd: only http:// and https:// URLs can be fetched');
      await rejectsWith(httpGet('https://me:secret@example.com/'), 'cannot fetch https://me:secret@example.com/: a URL holds no user name or password; send credentials in a header');
    },
  );
  assert.equal(originOf('HTTPS://API.GitHub.com/repos'), 'https://api.github.com');
  assert.throws(() => originOf('mailto:a@b.c'), Fail);
});

test('trailing whitespace is trimmed by the rule every language shares', () => {
  assert.equal(trimEnd('hello \u00a0\u0085\r\n\t'), 'hello');
  assert.equal(trimEnd('keep\ufeff'), 'keep\ufeff', 'U+FEFF is no whitespace');
  assert.equal(trimEnd('  lead'), '  lead');
});
