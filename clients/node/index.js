'use strict';
// A client of the lineage sidecar (`lineage serve`), with no dependencies:
// node:http over the daemon's Unix socket, and run(), in
// child_process.execFile's shape, that never waits on a command's leftovers.
// Types: index.d.ts. API: docs/api.md.

const childProcess = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');

const DEFAULT_SOCKET = '/run/lineage/lineage.sock';
const DEFAULT_HOLD_DELAY_MS = 100;
const DEFAULT_MAX_BUFFER = 1024 * 1024;
// How long a connect waits for room in the daemon's full backlog, in ms.
const BUSY_WAIT = 5000;
// lineage exec's exit status when it failed itself, before the command
// (its registration refused, or no daemon reached).
const EXIT_LINEAGE_FAILED = 125;

/** An error the daemon answered with, or the daemon out of reach. */
class LineageError extends Error {
  constructor(code, message, status = 0) {
    super(`${code}: ${message}`);
    this.name = 'LineageError';
    this.code = code;
    this.status = status;
  }
}

/**
 * The error of a request no daemon answered: code 'unavailable', saying
 * whether this uid may not use the socket or no daemon answers.
 */
function unreachable(socket, e) {
  if (e.code === 'EACCES') {
    return new LineageError('unavailable', `uid ${process.getuid()} may not use the socket ${socket} ` +
      `(its mode and group decide who may: lineage serve --socket-mode, --socket-group): ${e.message}`);
  }
  return new LineageError('unavailable', `no daemon answers at ${socket}: ${e.message}`);
}

/** "PID@START" from a string, an API identity or a [pid, start] pair. */
function identityString(id) {
  if (typeof id === 'string') return id;
  if (Array.isArray(id)) return `${id[0]}@${id[1]}`;
  return `${id.pid}@${id.start}`;
}

/** An identity as the API's object, {pid, start}; a TypeError when it names none. */
function identityObject(id) {
  const m = /^(\d+)@(\d+)$/.exec(identityString(id));
  if (!m) throw new TypeError(`not an identity (PID@START): ${JSON.stringify(id)}`);
  return { pid: Number(m[1]), start: Number(m[2]) };
}

/** Field 22 of /proc/PID/stat: the kernel's start time of pid. */
function startTicks(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
}

/** Finds a program on PATH, as execvp would. */
function lookPath(file, envPath) {
  if (file.includes('/')) return file;
  for (const dir of (envPath || '').split(':')) {
    const candidate = path.join(dir || '.', file);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * socket made absolute against the working directory of this moment, as
 * run() hands it to lineage exec in the command's own cwd; a name in the
 * abstract namespace (a leading NUL) is no path, and is kept as it is, as
 * is a relative path when there is no working directory to read.
 */
function absSocket(socket) {
  if (socket.startsWith('\0')) return socket;
  try {
    return path.resolve(socket);
  } catch {
    return socket;
  }
}

class Client {
  /**
   * @param {{socket?: string, lineage?: string, timeout?: number}} [options]
   */
  constructor(options = {}) {
    this.socket = absSocket(options.socket || process.env.LINEAGE_SOCKET || DEFAULT_SOCKET);
    this.lineage = options.lineage || process.env.LINEAGE_BIN || 'lineage';
    this.timeout = options.timeout;
  }

  /**
   * Opens a request; resolves with the response once its headers are in.
   * A Unix socket whose backlog of connections not yet accepted is full
   * refuses a connect at once (EAGAIN) where a blocking one would wait for
   * room: a flood of another user's connections fills it for an instant.
   * So a full backlog is tried again, for up to BUSY_WAIT ms (the timeout,
   * if shorter), as the Go client does; nothing was sent yet.
   */
  async _open(method, urlPath, body) {
    const deadline = Date.now() + Math.min(BUSY_WAIT, this.timeout > 0 ? this.timeout : BUSY_WAIT);
    for (let wait = 1; ; wait = Math.min(2 * wait, 50)) {
      try {
        return await this._try(method, urlPath, body);
      } catch (e) {
        if (e instanceof LineageError) throw e;
        if (e.code !== 'EAGAIN' || e.syscall !== 'connect' || Date.now() >= deadline) {
          throw unreachable(this.socket, e);
        }
      }
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  /** One try of _open: it rejects with the daemon's LineageError, or the
   * request's own error when no answer came. */
  _try(method, urlPath, body) {
    return new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const headers = data ? { 'Content-Type': 'application/json', 'Content-Length': data.length } : {};
      const req = http.request({ socketPath: this.socket, path: urlPath, method, headers, timeout: this.timeout }, (res) => {
        if (res.statusCode < 300) {
          resolve(res);
          return;
        }
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks).toString();
          try {
            const err = JSON.parse(raw);
            reject(new LineageError(err.code, err.error, res.statusCode));
          } catch {
            reject(new LineageError('internal', raw.trim(), res.statusCode));
          }
        });
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.timeout} ms`)));
      req.on('error', reject);
      req.end(data);
    });
  }

  /** Sends one request and resolves with its JSON answer. */
  async request(method, urlPath, body) {
    const res = await this._open(method, urlPath, body);
    const chunks = [];
    for await (const c of res) chunks.push(c);
    const raw = Buffer.concat(chunks).toString();
    return raw ? JSON.parse(raw) : null;
  }

  /**
   * The path of session id's endpoint tail, the id one escaped segment (its
   * dots too when it is dots alone: the daemon would clean "." and ".."
   * away, to another endpoint). An empty id is a TypeError.
   */
  static _session(id, tail = '') {
    let seg = encodeURIComponent(id === undefined || id === null ? '' : id);
    if (!seg) throw new TypeError('no session id given');
    if (!seg.replace(/\./g, '')) seg = seg.replace(/\./g, '%2E');
    return `/v1/sessions/${seg}${tail}`;
  }

  /** A request to session id's endpoint tail; rejects for an empty id. */
  async _sessionRequest(method, id, tail) {
    return this.request(method, Client._session(id, tail));
  }

  status() { return this.request('GET', '/v1/status'); }

  /**
   * Opens a session (the daemon names it when id is not given). owner, an
   * identity, closes it when that process ends; keep are its first keep
   * rules; selfClose lets a member close it. An option it doesn't know is
   * a TypeError, not dropped.
   */
  openSession(options = {}) {
    const body = {};
    for (const [k, v] of Object.entries(options)) {
      if (v === undefined) continue;
      switch (k) {
        case 'id': case 'kind': case 'label': case 'parent': body[k] = v; break;
        case 'owner': body.owner = identityObject(v); break;
        case 'keep': body.keep = Array.from(v, String); break;
        case 'selfClose': body.self_close = Boolean(v); break;
        default: throw new TypeError(`openSession: unknown option ${JSON.stringify(k)}`);
      }
    }
    return this.request('POST', '/v1/sessions', body);
  }

  session(id) { return this._sessionRequest('GET', id, ''); }
  turnEnd(id) { return this._sessionRequest('POST', id, '/turn-end'); }
  sessionClose(id) { return this._sessionRequest('POST', id, '/close'); }
  report(id) { return this._sessionRequest('GET', id, '/report'); }

  keep(identity, options = {}) {
    const body = { process: identityString(identity) };
    if (options.root) body.root = true;
    if (options.ttl !== undefined) body.ttl = typeof options.ttl === 'number' ? `${options.ttl}s` : options.ttl;
    return this.request('POST', '/v1/keeps', body);
  }

  /**
   * The live members of root's lineage holding any of pipes (inodes) or
   * the other end of any of sockets (the inodes of this process's ends).
   */
  holders(root, pipes = [], sockets = []) {
    const q = [];
    if (pipes.length) q.push(`pipe=${pipes.join(',')}`);
    if (sockets.length) q.push(`socket=${sockets.join(',')}`);
    return this.request('GET', `/v1/roots/${identityString(root)}/holders?${q.join('&')}`);
  }

  endRoot(root, event = 'deadline') {
    return this.request('POST', `/v1/roots/${identityString(root)}/end`, { event });
  }

  /**
   * The session's events (record schema), the header first; with a
   * session, the iteration ends when it closes (its last event is `end`).
   */
  async *events(session) {
    const q = session === undefined ? '' : `?session=${encodeURIComponent(session)}`;
    const res = await this._open('GET', `/v1/events${q}`);
    let rest = '';
    try {
      for await (const chunk of res) {
        rest += chunk.toString();
        let nl;
        while ((nl = rest.indexOf('\n')) >= 0) {
          const line = rest.slice(0, nl);
          rest = rest.slice(nl + 1);
          if (line) yield JSON.parse(line);
        }
      }
    } finally {
      res.destroy();
    }
  }

  /**
   * Opens session id with kind unless it exists, as lineage exec would;
   * rejects with the LineageError of a daemon out of reach, of one that
   * refuses the session, or a conflict when another uid opened it (its
   * roots would be its opener's) or it is of another kind.
   */
  async _ensureSession(id, kind) {
    let s;
    try {
      s = await this.session(id);
    } catch (e) {
      if (!(e instanceof LineageError) || e.code !== 'not_found') throw e;
      try {
        await this.openSession({ id, kind });
        return;
      } catch (e2) {
        if (!(e2 instanceof LineageError) || e2.code !== 'conflict') throw e2;
        // Opened meanwhile: by another caller of ours, fine; by another
        // uid, whose session this caller can't see (or, as root, can),
        // refused.
        try {
          s = await this.session(id);
        } catch (e3) {
          throw e3 instanceof LineageError && e3.code === 'not_found' ? e2 : e3;
        }
      }
    }
    if (s.uid !== process.geteuid()) {
      throw new LineageError('conflict', `session ${JSON.stringify(id)} was opened by uid ${s.uid}: its roots are its opener's, so nothing runs (as root, lineage exec --join joins it)`, 409);
    }
    if (kind && s.kind !== kind) {
      // A turn end would do otherwise than the caller expects.
      throw new LineageError('conflict', `session ${JSON.stringify(id)} is ${s.kind}, not ${kind}: a session's kind is set when it opens`, 409);
    }
  }


  /**
   * Runs file with args as a root of options.session, in
   * child_process.execFile's shape: with a callback, it returns the child
   * and calls back (error, stdout, stderr); without, it returns a promise
   * of {stdout, stderr, code, holders, root} (rejected with the error,
   * which carries the same) with the child as its `child`. A session the
   * daemon refuses, or no daemon, runs nothing and fails with the API's
   * LineageError.
   */
  run(file, args, options, callback) {
    if (typeof args === 'function') { callback = args; args = []; options = {}; }
    else if (!Array.isArray(args)) { callback = options; options = args; args = []; }
    if (typeof options === 'function') { callback = options; options = {}; }
    options = options || {};
    if (!options.session) throw new TypeError('run: options.session is required');
    if (callback) {
      const run = new Run(this, file, args, options, (err, res) => callback(err, res.stdout, res.stderr));
      return run.child;
    }
    let run;
    const promise = new Promise((resolve, reject) => {
      run = new Run(this, file, args, options, (err, res) => (err ? reject(err) : resolve(res)));
    });
    promise.child = run ? run.child : undefined;
    return promise;
  }
}

/** One command run as a root: its child, its pipes, its end. */
class Run {
  constructor(client, file, args, options, done) {
    this.client = client;
    this.options = options;
    this.done = done;
    this.holdDelay = options.holdDelay === undefined ? DEFAULT_HOLD_DELAY_MS : options.holdDelay;
    this.maxBuffer = options.maxBuffer === undefined ? DEFAULT_MAX_BUFFER : options.maxBuffer;
    this.encoding = options.encoding === undefined ? 'utf8' : options.encoding;
    this.out = { stdout: [], stderr: [] };
    this.size = 0;
    this.holders = [];
    this.finished = false;
    this.ended = false;
    this.ending = null; // endLineage's promise, while the daemon reaps
    let command = [file, ...args];
    if (options.shell) command = [typeof options.shell === 'string' ? options.shell : '/bin/sh', '-c', command.join(' ')];
    const lineage = lookPath(client.lineage, process.env.PATH);
    if (!lineage) throw new LineageError('unavailable', `no lineage binary ${client.lineage} (give lineage or set LINEAGE_BIN)`);
    const argv = ['exec', '--socket', client.socket, '--session', options.session];
    if (options.kind) argv.push('--kind', options.kind);
    if (options.label) argv.push('--label', options.label);
    argv.push('--', ...command);
    this.cmd = command.join(' ');
    // The session is checked through the API beside the start (run gives
    // the child back at once, as execFile does): a refusal lineage exec
    // meets too, which then runs nothing, is the API's LineageError.
    this.check = client._ensureSession(options.session, options.kind).then(() => null, (e) => e);
    const stdin = options.input === undefined ? 'ignore' : 'pipe';
    this.child = childProcess.spawn(lineage, argv, {
      cwd: options.cwd, env: options.env, stdio: [stdin, 'pipe', 'pipe'], windowsHide: true,
    });
    const child = this.child;
    if (child.pid === undefined) {
      child.on('error', (e) => this.finish(e, null, null));
      return;
    }
    // Not waited for yet (libuv reaps in the event loop, later): the
    // pid is still the command's.
    this.root = `${child.pid}@${startTicks(child.pid)}`;
    child.root = this.root;
    child.holders = this.holders;
    this.pipes = ['stdout', 'stderr'].map((name) => this.pipe(name, child[name]));
    if (options.input !== undefined) child.stdin.end(options.input);
    if (child.stdin) child.stdin.on('error', () => {});
    child.on('exit', (code, signal) => this.exited(code, signal));
    child.on('error', (e) => this.finish(e, null, null));
    if (options.timeout > 0) {
      this.timer = setTimeout(() => { this.ending = this.endLineage(); }, options.timeout);
    }
  }

  pipe(name, stream) {
    // libuv makes a child's stdio of socketpairs, whose two ends have
    // inodes of their own: the daemon is asked about this end's, and finds
    // the holders of the other. (Pipes, should a stream be one, by theirs.)
    const p = { name, stream, fd: stream._handle ? stream._handle.fd : -1, ended: false, inode: 0, socket: false };
    if (p.fd >= 0) {
      const st = fs.fstatSync(p.fd);
      p.inode = st.ino;
      p.socket = st.isSocket();
    }
    stream.on('data', (chunk) => this.take(name, chunk));
    stream.on('end', () => { p.ended = true; this.maybeClose(); });
    stream.on('error', () => { p.ended = true; this.maybeClose(); });
    return p;
  }

  take(name, chunk) {
    this.out[name].push(chunk);
    this.size += chunk.length;
    if (this.size > this.maxBuffer && !this.overflow) {
      this.overflow = true;
      this.ending = this.endLineage();
    }
  }

  exited(code, signal) {
    this.code = code;
    this.signal = signal;
    clearTimeout(this.timer);
    // From here on, the pipes get hold delay to end, and no more.
    this.holdTimer = setTimeout(() => this.giveUp(), this.holdDelay);
    this.maybeClose();
  }

  maybeClose() {
    if (this.code === undefined && this.signal === undefined) return;
    if (this.pipes.every((p) => p.ended)) {
      clearTimeout(this.holdTimer);
      this.settle();
    }
  }

  /** The hold delay is over: take what the pipes hold now, then name who holds them. */
  async giveUp() {
    const held = this.pipes.filter((p) => !p.ended);
    for (const p of held) {
      this.drain(p);
      p.ended = true;
      p.stream.pause();
    }
    // Asked while this end is still open: a socket's other end is found
    // through it.
    if (held.length && !this.ended) {
      try {
        const answer = await this.client.holders(this.root,
          held.filter((p) => !p.socket).map((p) => p.inode), held.filter((p) => p.socket).map((p) => p.inode));
        this.nameHolders(answer, held);
      } catch {
        // no names, then
      }
    }
    for (const p of held) p.stream.destroy();
    this.settle();
  }

  drain(p) {
    if (p.fd < 0) return;
    const buf = Buffer.alloc(64 * 1024);
    for (;;) {
      let n;
      try {
        n = fs.readSync(p.fd, buf, 0, buf.length, null);
      } catch {
        return; // EAGAIN: empty
      }
      if (n <= 0) return;
      this.take(p.name, Buffer.from(buf.subarray(0, n)));
    }
  }

  nameHolders(answer, held) {
    const streams = new Map(held.map((p) => [p.inode, p.name]));
    for (const h of answer.holders || []) {
      const holder = {
        pid: h.process.pid, start: h.process.start, identity: `${h.process.pid}@${h.process.start}`,
        argv: h.argv || [], comm: h.comm || '', ageMs: (h.age_ns || 0) / 1e6, streams: [],
      };
      for (const fd of h.fds || []) {
        const s = streams.get(fd.pipe || fd.socket);
        if (s && !holder.streams.includes(s)) holder.streams.push(s);
      }
      this.holders.push(holder);
    }
  }

  /** Ends the command's whole lineage through the daemon (a deadline). */
  async endLineage() {
    if (this.ended) return;
    this.ended = true;
    this.killed = true;
    try {
      await this.client.endRoot(this.root);
      return;
    } catch {
      // not registered yet: kill the process we hold, then ask again
    }
    this.child.kill('SIGKILL');
    await new Promise((resolve) => (this.code !== undefined ? resolve() : this.child.once('exit', resolve)));
    try {
      await this.client.endRoot(this.root);
    } catch {
      // gone with its process
    }
  }

  output(name) {
    const data = Buffer.concat(this.out[name]);
    return this.encoding === 'buffer' || this.encoding === null ? data : data.toString(this.encoding);
  }

  settle() {
    // A lineage being ended is answered once the daemon has reaped it: a
    // caller told of the timeout finds none of it alive.
    if (this.ending) {
      const ending = this.ending;
      this.ending = null;
      ending.then(() => this.settle(), () => this.settle());
      return;
    }
    // lineage exec failed itself: the check's refusal, if it met one, says
    // why in the API's terms.
    if (this.code === EXIT_LINEAGE_FAILED && this.check) {
      const check = this.check;
      this.check = null;
      check.then((refusal) => {
        this.refusal = refusal instanceof LineageError ? refusal : null;
        this.settle();
      });
      return;
    }
    const stdout = this.output('stdout');
    const stderr = this.output('stderr');
    let err = null;
    if (this.refusal) {
      err = this.refusal;
    } else if (this.overflow) {
      err = new RangeError(`stdout or stderr over maxBuffer (${this.maxBuffer} bytes)`);
      err.code = 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER';
    } else if (this.code !== 0 || this.killed) {
      err = new Error(`Command failed: ${this.cmd}\n${stderr}`);
      err.code = this.code;
      err.killed = Boolean(this.killed);
      err.signal = this.signal;
    }
    this.finish(err, stdout, stderr);
  }

  finish(err, stdout, stderr) {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.timer);
    const res = { stdout, stderr, code: this.code, signal: this.signal, holders: this.holders, root: this.root };
    if (err) {
      Object.assign(err, { cmd: this.cmd, stdout, stderr, holders: this.holders, root: this.root });
    }
    this.done(err, res);
  }
}

module.exports = { Client, LineageError, DEFAULT_SOCKET, DEFAULT_HOLD_DELAY_MS };
