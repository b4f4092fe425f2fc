// tests/integration/helpers/node_sockets.js -- Node's libuv event loop (epoll, nonblocking
// sockets, writev) under LD_PRELOAD (tests/integration/node.sh).
//
//   node node_sockets.js server        echo server (net.createServer); prints its port
//   node node_sockets.js client PORT   the cases below against it, then against servers of its own;
//                                      one deterministic line per result
//
// Every connection first makes sixteen round trips a millisecond apart, so that it lives long enough
// to switch to the rings before its case begins (the shim's stats say it did).
'use strict';
const net = require('net');
const crypto = require('crypto');

const say = (s) => process.stdout.write(s + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Resolves with the next `n` bytes the socket delivers (a queue over 'data').
function reader(sock) {
  let buf = Buffer.alloc(0), want = 0, wake = null, ended = false, err = null;
  sock.on('data', (d) => { buf = Buffer.concat([buf, d]); if (wake && buf.length >= want) { const w = wake; wake = null; w(); } });
  sock.on('end', () => { ended = true; if (wake) { const w = wake; wake = null; w(); } });
  sock.on('error', (e) => { err = e; if (wake) { const w = wake; wake = null; w(); } });
  return {
    async take(n) {
      want = n;
      while (buf.length < n && !ended && !err) await new Promise((r) => { wake = r; });
      if (err) throw err;
      const out = buf.subarray(0, Math.min(n, buf.length));
      buf = buf.subarray(out.length);
      return out;
    },
    async rest() {
      while (!ended && !err) { want = Infinity; await new Promise((r) => { wake = r; }); }
      if (err) throw err;
      const out = buf; buf = Buffer.alloc(0); return out;
    },
    get ended() { return ended; },
    get error() { return err; },
  };
}

function listen(opts, onConn) {
  return new Promise((resolve) => {
    const srv = net.createServer(opts, onConn);
    srv.listen(0, '127.0.0.1', () => resolve(srv));
  });
}

function connect(port) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

// Sixteen round trips, a millisecond apart, through a server that echoes.
async function warmUp(r, sock) {
  for (let i = 0; i < 16; i++) {
    sock.write('w');
    const b = await r.take(1);
    if (b.toString() !== 'w') throw new Error('warm-up echo');
    await sleep(1);
  }
}

// A: four connections to the echo server at once: 50 round trips, then 4 MB and end().
async function echoMany(port) {
  const one = async (id) => {
    const s = await connect(port);
    const r = reader(s);
    await warmUp(r, s);
    for (let i = 0; i < 50; i++) {
      const ping = Buffer.from('ping' + i);
      s.write(ping);
      if (!(await r.take(ping.length)).equals(ping)) return 'bad echo';
    }
    const big = crypto.createHash('sha256').update('seed' + id).digest();
    const data = Buffer.alloc(4 << 20);
    for (let o = 0; o < data.length; o += big.length) big.copy(data, o);
    s.end(data);
    const back = await r.rest();
    const same = crypto.createHash('sha256').update(back).digest('hex') === crypto.createHash('sha256').update(data).digest('hex');
    return `${back.length} bytes, ${same ? 'same sha256' : 'DIFFERENT sha256'}`;
  };
  const res = await Promise.all([0, 1, 2, 3].map((i) => one(i).catch((e) => e.code || e.message)));
  res.forEach((x, i) => say(`A echo ${i}: ${x}`));
}

// A server of our own whose connection handler is `serve(sock, reader)`; an echo for the warm-up
// until the client sends '!'.
async function withServer(opts, serve, client) {
  let done;
  const served = new Promise((r) => { done = r; });
  const srv = await listen(opts, (sock) => {
    const r = reader(sock);
    (async () => {
      for (;;) {
        const b = await r.take(1);
        if (b.length === 0 || b.toString() === '!') break;
        sock.write(b);
      }
      await serve(sock, r);
    })().catch((e) => say('server side: ' + (e.code || e.message))).finally(done);
  });
  const s = await connect(srv.address().port);
  const r = reader(s);
  await warmUp(r, s);
  s.write('!');
  await client(s, r);
  await served;
  srv.close();
}

// B: half-open (allowHalfOpen): we end(); the peer reads to the end, answers, ends.
async function halfOpen() {
  await withServer({ allowHalfOpen: true }, async (sock, r) => {
    say('B the peer read before the end: ' + (await r.rest()).toString());
    sock.end('bye');
  }, async (s, r) => {
    s.end('last words');
    say('B the answer after our end(): ' + (await r.rest()).toString() + ', then the end');
  });
}

// C: back-pressure: the peer reads nothing for a while; we write 8 MB, honouring write()'s false
// and 'drain'; then the peer reads it all.
async function backPressure() {
  const total = 8 << 20;
  await withServer({}, async (sock, r) => {
    sock.pause();
    await sleep(300);
    sock.resume();
    const got = await r.take(total);
    say(`C the peer read ${got.length} bytes after pausing`);
    sock.end();
  }, async (s, r) => {
    const chunk = Buffer.alloc(64 << 10, 7);
    let sent = 0, waited = false;
    while (sent < total) {
      if (!s.write(chunk)) {
        waited = true;
        await new Promise((res) => s.once('drain', res));
      }
      sent += chunk.length;
    }
    say(`C wrote ${sent} bytes, write() said wait: ${waited}`);
    await r.rest();
  });
}

// D: the peer resets (resetAndDestroy: SO_LINGER 0 then close): we see ECONNRESET.
async function reset() {
  await withServer({}, async (sock) => {
    sock.resetAndDestroy();
  }, async (s, r) => {
    try {
      await r.rest();
      say('D after the peer reset: the end');
    } catch (e) {
      say('D after the peer reset: ' + e.code);
    }
  });
}

// E: an idle timeout fires with nothing sent, then the connection still works.
async function idleTimeout() {
  await withServer({}, async (sock, r) => {
    const b = await r.take(5);
    sock.end(b);
  }, async (s, r) => {
    s.setTimeout(200);
    await new Promise((res) => s.once('timeout', res));
    s.setTimeout(0);
    say('E idle timeout fired');
    s.write('again');
    say('E then: ' + (await r.rest()).toString());
  });
}

async function client(port) {
  await echoMany(port);
  await halfOpen();
  await backPressure();
  await reset();
  await idleTimeout();
  say('done');
}

if (process.argv[2] === 'server') {
  listen({}, (s) => { s.on('data', (d) => s.write(d)); s.on('end', () => s.end()); s.on('error', () => {}); })
    .then((srv) => say(String(srv.address().port)));
} else {
  client(+process.argv[3]).then(() => process.exit(0), (e) => { say('failed: ' + (e.stack || e)); process.exit(1); });
}
