'use strict';
// Tests of the Node client against a real daemon. They need one:
// cmd/lineage/node_client_e2e_test.go (run by `make test`) starts it and
// runs `node --test` here with LINEAGE_SOCKET, LINEAGE_BIN and
// LINEAGE_TEST_MARK set. Every process they start sleeps for a finite
// time and carries the mark, so the Go test finds any leak.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const { Client, LineageError, DEFAULT_HOLD_DELAY_MS } = require('..');

const MARK = process.env.LINEAGE_TEST_MARK || '';
const skip = !(process.env.LINEAGE_SOCKET && MARK) && 'needs a daemon: run through go test ./cmd/lineage -run TestNodeClient';
const client = new Client();
let count = 0;
const sessionName = (what) => `node-${what}-${process.pid}-${++count}`;
const leaveScript = `echo built; setsid sleep 90.${MARK} & (sleep 91.${MARK} &)`;

/** Field 22 of /proc/PID/stat, or null when gone or a zombie. */
function startTicks(pid) {
  let stat;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields[0] === 'Z' || fields[0] === 'X' ? null : Number(fields[19]);
}

async function waitUntil(cond, what, ms = 30000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const gone = (h) => waitUntil(() => startTicks(h.pid) !== h.start, `${h.argv.join(' ')} to end`);

/** Runs the command; resolves with the result and the ms from the command's exit to the callback. */
function runLeaving(session, kind) {
  return new Promise((resolve, reject) => {
    let exitedAt;
    const child = client.run('sh', ['-c', leaveScript], { session, kind }, (err, stdout, stderr) => {
      if (err) return reject(err);
      resolve({ stdout, stderr, holders: child.holders, tookMs: Date.now() - exitedAt });
    });
    child.on('exit', () => { exitedAt = Date.now(); });
  });
}

for (const kind of ['autonomous', 'interactive']) {
  test(`run returns past its leftovers (${kind})`, { skip }, async () => {
    const session = sessionName(kind);
    const res = await runLeaving(session, kind);
    assert.ok(res.tookMs < 1000, `the callback came ${res.tookMs} ms after the command exited (hold delay ${DEFAULT_HOLD_DELAY_MS} ms)`);
    assert.equal(res.stdout, 'built\n');
    // Each holder is a sleeper, named by its argument: one may still be
    // setsid, before its exec of sleep, when it was named.
    assert.deepEqual(res.holders.map((h) => h.argv[h.argv.length - 1]).sort(), [`90.${MARK}`, `91.${MARK}`]);
    for (const h of res.holders) {
      assert.deepEqual(h.streams, ['stdout', 'stderr']);
      assert.equal(startTicks(h.pid), h.start);
    }
    const ended = await client.turnEnd(session);
    if (kind === 'autonomous') {
      await Promise.all(res.holders.map(gone));
    } else {
      const reported = ended.roots.flatMap((r) => r.outcomes).filter((o) => o.result === 'reported').map((o) => o.process.pid);
      assert.deepEqual(reported.sort(), res.holders.map((h) => h.pid).sort());
      for (const h of res.holders) assert.equal(startTicks(h.pid), h.start, `${h.argv} died at an interactive turn end`);
    }
    await client.sessionClose(session);
    await Promise.all(res.holders.map(gone));
  });
}

test('1 MiB before the exit: every byte, no deadlock', { skip }, async () => {
  const session = sessionName('mib');
  const res = await client.run('sh', ['-c', `head -c 1048576 /dev/zero; ${leaveScript}`],
    { session, kind: 'autonomous', encoding: 'buffer', maxBuffer: 4 << 20 });
  assert.equal(res.stdout.length, (1 << 20) + 'built\n'.length);
  assert.ok(res.stdout.subarray(0, 1 << 20).every((b) => b === 0));
  assert.equal(res.stdout.subarray(1 << 20).toString(), 'built\n');
  assert.equal(res.holders.length, 2);
  await client.sessionClose(session);
  await Promise.all(res.holders.map(gone));
});

test('timeout ends the whole lineage, a setsid\'d grandchild included', { skip }, async () => {
  const session = sessionName('timeout');
  const bystander = await client.run('sh', ['-c', `setsid sleep 97.${MARK} >/dev/null 2>&1 & echo $!`], { session, kind: 'interactive' });
  const kept = Number(bystander.stdout.trim());
  const keptStart = startTicks(kept);
  const err = await client.run('sh', ['-c', `echo started; setsid sleep 92.${MARK} & echo $!; wait`], { session, timeout: 1000 })
    .then(() => null, (e) => e);
  assert.ok(err, 'the run did not fail');
  assert.equal(err.killed, true);
  assert.match(err.stdout, /^started\n\d+\n$/);
  const grandchild = Number(err.stdout.split('\n')[1]);
  assert.equal(startTicks(grandchild), null, 'the setsid\'d grandchild outlived the timeout');
  assert.equal(startTicks(kept), keptStart, 'the timeout touched another root');
  await client.sessionClose(session);
  await waitUntil(() => startTicks(kept) === null, 'the bystander to end');
});

test('input, exit codes and stderr as execFile gives them', { skip }, async () => {
  const session = sessionName('shape');
  const res = await client.run('cat', [], { session, input: 'fed' });
  assert.equal(res.stdout, 'fed');
  const err = await client.run('sh', ['-c', 'echo oops >&2; exit 3'], { session }).then(() => null, (e) => e);
  assert.equal(err.code, 3);
  assert.equal(err.stderr, 'oops\n');
  // The command's own 125 is its own: no refusal behind it.
  const own = await client.run('sh', ['-c', 'exit 125'], { session }).then(() => null, (e) => e);
  assert.ok(own && !(own instanceof LineageError) && own.code === 125, `exit 125: ${own}`);
  await new Promise((resolve) => {
    client.run('echo', ['cb'], { session }, (e, stdout) => {
      assert.equal(e, null);
      assert.equal(stdout, 'cb\n');
      resolve();
    });
  });
  await client.sessionClose(session);
});

test('events end when the session closes', { skip }, async () => {
  const session = sessionName('events');
  await client.openSession({ id: session, kind: 'autonomous' });
  const kinds = [];
  const stream = client.events(session);
  const header = (await stream.next()).value;
  assert.equal(header.schema, 'lineage-record');
  await client.run('true', [], { session });
  const closing = client.sessionClose(session);
  for await (const ev of stream) kinds.push(ev.kind);
  await closing;
  assert.ok(kinds.includes('exec'), kinds.join(' '));
  assert.equal(kinds[kinds.length - 1], 'end');
});

test('a session opened with an owner and keeps closes when its owner ends', { skip }, async () => {
  const session = sessionName('owned');
  const { spawn } = require('node:child_process');
  const owner = spawn('sleep', [`60.${MARK}`], { stdio: 'ignore' });
  await waitUntil(() => startTicks(owner.pid) !== null, 'the owner to start');
  const ownerId = `${owner.pid}@${startTicks(owner.pid)}`;
  try {
    const opened = await client.openSession({
      id: session, kind: 'autonomous', owner: ownerId, keep: ['exe:/usr/bin/redis-server'], selfClose: true,
    });
    assert.deepEqual(opened.owner, { pid: owner.pid, start: startTicks(owner.pid) });
    assert.deepEqual(opened.keeps.map((k) => k.rule), ['exe:/usr/bin/redis-server']);
    assert.equal(opened.self_close, true);
  } finally {
    owner.kill('SIGKILL');
  }
  await new Promise((resolve) => (owner.exitCode !== null || owner.signalCode !== null ? resolve() : owner.once('exit', resolve)));
  const deadline = Date.now() + 10000;
  for (;;) {
    const gone = await client.session(session).then(() => false, (e) => e instanceof LineageError && e.code === 'not_found');
    if (gone) break;
    if (Date.now() > deadline) assert.fail('the session is still open after its owner ended');
    await new Promise((r) => setTimeout(r, 20));
  }
  // What it can't send is refused here, not dropped.
  assert.throws(() => client.openSession({ id: session, kep: ['exe:/bin/x'] }), TypeError);
  assert.throws(() => client.openSession({ id: session, owner: 'nobody' }), TypeError);
});

test('bad input is refused and runs nothing', { skip }, async () => {
  await assert.rejects(client.keep('not-an-identity'), (e) => e instanceof LineageError && e.code === 'invalid' && e.status === 400);
  await assert.rejects(client.turnEnd(sessionName('none')), (e) => e.code === 'not_found');
  await assert.rejects(new Client({ socket: '/nonexistent/lineage.sock' }).status(), (e) => e.code === 'unavailable');
  const marker = `${process.env.TMPDIR || '/tmp'}/lineage-node-${MARK}`;
  // A bad session, or no daemon, is the API's LineageError, as every
  // call's is, and runs nothing.
  const err = await client.run('touch', [marker], { session: 'has space' }).then(() => null, (e) => e);
  assert.ok(err instanceof LineageError && err.code === 'invalid' && err.status === 400, `a bad session: ${err}`);
  // lineage exec checks the id itself before it asks the daemon.
  assert.match(err.stderr, /^lineage: exec: invalid session id "has space"/);
  const down = new Client({ socket: '/nonexistent/lineage.sock' });
  const none = await down.run('touch', [marker], { session: sessionName('down') }).then(() => null, (e) => e);
  assert.ok(none instanceof LineageError && none.code === 'unavailable', `no daemon: ${none}`);
  await new Promise((resolve) => {
    down.run('touch', [marker], { session: sessionName('down') }, (e) => {
      assert.ok(e instanceof LineageError && e.code === 'unavailable', `no daemon, called back: ${e}`);
      resolve();
    });
  });
  assert.equal(fs.existsSync(marker), false, 'the command ran for a bad session');
  assert.throws(() => client.run('true', [], {}), TypeError);
  assert.throws(() => client.run('true', [], { session: '' }), TypeError);
  for (const call of [client.session, client.turnEnd, client.sessionClose, client.report]) {
    await assert.rejects(call.call(client, ''), TypeError);
    // No id reaches another endpoint: dots alone are an id.
    for (const dots of ['.', '..']) {
      await assert.rejects(call.call(client, dots), (e) => e instanceof LineageError && e.code === 'not_found', `${call.name}(${dots})`);
    }
  }
});

test('a session of another kind is refused and runs nothing', { skip }, async () => {
  const id = sessionName('kind');
  await client.openSession({ id, kind: 'interactive' });
  const marker = `${process.env.TMPDIR || '/tmp'}/lineage-node-kind-${MARK}`;
  try {
    const err = await client.run('touch', [marker], { session: id, kind: 'autonomous' }).then(() => null, (e) => e);
    assert.ok(err instanceof LineageError && err.code === 'conflict' && /is interactive, not autonomous/.test(err.message), `another kind: ${err}`);
    assert.equal(fs.existsSync(marker), false, 'the command ran in a session of another kind');
    const same = await client.run('true', [], { session: id, kind: 'interactive' });
    assert.equal(same.code, 0, 'its own kind runs');
  } finally {
    await client.sessionClose(id);
  }
});

test('another uid\'s session is refused and runs nothing', { skip: skip || !process.env.LINEAGE_TEST_FOREIGN_SESSION }, async () => {
  // The Go test opened it as uid 65534.
  const marker = `${process.env.TMPDIR || '/tmp'}/lineage-node-foreign-${MARK}`;
  const err = await client.run('touch', [marker], { session: process.env.LINEAGE_TEST_FOREIGN_SESSION }).then(() => null, (e) => e);
  assert.ok(err instanceof LineageError && err.code === 'conflict' && /opened by uid 65534/.test(err.message), `another uid's session: ${err}`);
  assert.equal(fs.existsSync(marker), false, 'the command ran in another uid\'s session');
});

test('a relative socket serves commands run elsewhere', { skip }, async () => {
  // Made absolute when the client is made: a command run in another
  // directory reaches the same daemon.
  const sock = process.env.LINEAGE_SOCKET;
  const here = process.cwd();
  process.chdir(path.dirname(sock));
  let c;
  try {
    c = new Client({ socket: path.basename(sock) });
  } finally {
    process.chdir(here);
  }
  assert.equal(c.socket, sock);
  const session = sessionName('relsock');
  const res = await c.run('pwd', [], { session, cwd: '/' });
  assert.deepEqual([res.code, res.stdout, res.stderr], [0, '/\n', '']);
  await c.sessionClose(session);
});

// No daemon needed: a real EACCES, a listening socket of mode 0600 that
// uid 65534 connects to (root may use any socket, so root runs the client
// as 65534 in a child, the client's source given on its stdin).
test('a socket this uid may not use says so', async () => {
  const net = require('node:net');
  const os = require('node:os');
  const { spawnSync } = require('node:child_process');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lineage-node-'));
  fs.chmodSync(dir, 0o711);
  const sock = path.join(dir, 'lineage.sock');
  const server = net.createServer((c) => c.destroy());
  await new Promise((resolve) => server.listen(sock, resolve));
  try {
    const root = process.getuid() === 0;
    fs.chmodSync(sock, root ? 0o600 : 0);
    const uid = root ? 65534 : process.getuid();
    const probe = `;new Client({ socket: ${JSON.stringify(sock)} }).status().then(
      () => console.log('answered'), (e) => console.log(e.code + '\\n' + e.message));`;
    const child = spawnSync(process.execPath, ['-'], {
      input: fs.readFileSync(path.join(__dirname, '..', 'index.js'), 'utf8') + probe,
      cwd: '/', timeout: 20000, encoding: 'utf8',
      ...(root ? { uid, gid: uid } : {}),
    });
    assert.equal(child.status, 0, `the child: ${child.stderr}`);
    const [code, message] = child.stdout.trim().split('\n');
    assert.equal(code, 'unavailable', child.stdout);
    assert.ok(message.includes(`uid ${uid} may not use the socket ${sock}`) && message.includes('--socket-group'), message);
  } finally {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// No daemon needed: a backlog full (a listening server in a child, stopped
// while this process fills its backlog), which refuses a connect at once
// (EAGAIN) until the child, continued, accepts.
test('a full backlog is waited for, for up to the timeout', async () => {
  const net = require('node:net');
  const os = require('node:os');
  const { spawn } = require('node:child_process');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lineage-node-'));
  const sock = path.join(dir, 'lineage.sock');
  const server = spawn(process.execPath, ['-e', `
    const server = require('node:http').createServer((req, res) => {
      res.setHeader('Content-Type', 'application/json');
      res.end('{"api":1}', () => process.exit(0));
    });
    server.listen({ path: ${JSON.stringify(sock)}, backlog: 0 }, () => console.log('ready'));
    setTimeout(() => process.exit(1), 20000);`], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => server.on('exit', resolve));
  const fillers = [];
  try {
    await new Promise((resolve) => server.stdout.once('data', resolve));
    server.kill('SIGSTOP');
    for (;;) {
      const c = net.connect(sock);
      const err = await new Promise((resolve) => { c.once('connect', () => resolve(null)); c.once('error', resolve); });
      if (err) {
        assert.equal(err.code, 'EAGAIN', `a filler's connect: ${err}`);
        break;
      }
      fillers.push(c);
    }
    assert.ok(fillers.length >= 1, 'the backlog took no connection');

    // A backlog that stays full: unavailable once the timeout passes.
    let start = Date.now();
    const err = await new Client({ socket: sock, timeout: 400 }).status().catch((e) => e);
    const took = Date.now() - start;
    assert.ok(err instanceof LineageError && err.code === 'unavailable' && /EAGAIN/.test(err.message), `a backlog that stays full: ${err}`);
    assert.ok(took >= 350 && took < 3000, `gave up after ${took} ms, not about 400`);

    // A backlog that frees: the answer, once the server accepts.
    start = Date.now();
    const answer = new Client({ socket: sock, timeout: 10000 }).status();
    await new Promise((resolve) => setTimeout(resolve, 300));
    for (const c of fillers) c.destroy();
    server.kill('SIGCONT');
    assert.deepEqual(await answer, { api: 1 });
    assert.ok(Date.now() - start >= 250, 'answered before the backlog had room');
    assert.equal(await exited, 0);
  } finally {
    for (const c of fillers) c.destroy();
    if (server.exitCode === null && server.signalCode === null) {
      server.kill('SIGKILL');
      server.kill('SIGCONT');
      await exited;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
