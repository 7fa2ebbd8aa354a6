// Types of the lineage sidecar's Node client (index.js). No dependencies:
// node:http over the daemon's Unix socket.

import type { ChildProcess } from 'node:child_process';

/** The default socket, when neither options nor $LINEAGE_SOCKET name one. */
export declare const DEFAULT_SOCKET: string;
/** Milliseconds a command's pipes are read after the command exits. */
export declare const DEFAULT_HOLD_DELAY_MS: number;

/** A process as the API names it: its pid and its kernel start time. */
export interface Identity {
  pid: number;
  start: number;
}

/** An error the daemon answered with (its API code), or `unavailable`. */
export declare class LineageError extends Error {
  constructor(code: string, message: string, status?: number);
  readonly code: string;
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  /** Set when a run failed with it, as on any run's error (RunError). */
  cmd?: string;
  stdout?: string | Buffer;
  stderr?: string | Buffer;
  holders?: Holder[];
  root?: string;
}

/** A member of the command's lineage that held one of its pipes when the hold delay ran out. */
export interface Holder {
  pid: number;
  start: number;
  /** "PID@START". */
  identity: string;
  argv: string[];
  comm: string;
  ageMs: number;
  /** The command's streams it held. */
  streams: Array<'stdout' | 'stderr'>;
}

export interface ClientOptions {
  /**
   * The daemon's socket: $LINEAGE_SOCKET, else DEFAULT_SOCKET. A relative
   * path is made absolute when the client is made, against the working
   * directory then, so that requests and the commands run() starts (in
   * their own cwd) reach the same daemon; a name in the abstract namespace
   * (a leading NUL) is kept as it is.
   */
  socket?: string;
  /** The lineage binary commands start through: $LINEAGE_BIN, else lineage on PATH. */
  lineage?: string;
  /** Milliseconds each request may take; none by default. */
  timeout?: number;
}

export interface RunOptions {
  /** The session the command joins; opened with kind if it doesn't exist. */
  session: string;
  kind?: 'interactive' | 'autonomous';
  /** The root's label. */
  label?: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** 'utf8' (the default) or another encoding; 'buffer' or null for Buffers. */
  encoding?: BufferEncoding | 'buffer' | null;
  /** Milliseconds; past it the command's whole lineage is ended through the daemon. */
  timeout?: number;
  /** Bytes of stdout and stderr together; past it the lineage is ended (default 1 MiB, as execFile's). */
  maxBuffer?: number;
  /** Milliseconds the pipes are read after the command exits (DEFAULT_HOLD_DELAY_MS). */
  holdDelay?: number;
  /** Written to the command's stdin, which is then closed; without it stdin is the null device. */
  input?: string | Buffer;
  /** Run the command line through /bin/sh -c (or this shell). */
  shell?: boolean | string;
}

export interface RunResult<T = string> {
  stdout: T;
  stderr: T;
  code: number | null;
  signal: NodeJS.Signals | null;
  holders: Holder[];
  /** The command's identity, "PID@START". */
  root: string;
}

/**
 * The error a failed run calls back or rejects with: execFile's, plus
 * holders and root. A session the daemon refuses, or no daemon, runs
 * nothing and is a LineageError (code 'invalid', 'unavailable', ...), with
 * the same fields: its stderr has lineage exec's own line.
 */
export interface RunError extends Error {
  code?: number | null | string;
  killed?: boolean;
  signal?: NodeJS.Signals | null;
  cmd?: string;
  stdout?: string | Buffer;
  stderr?: string | Buffer;
  holders?: Holder[];
  root?: string;
}

/** The child of a run with a callback: a ChildProcess with the command's root and its holders. */
export interface RunChild extends ChildProcess {
  root?: string;
  holders?: Holder[];
}

export type RunCallback = (error: RunError | null, stdout: string | Buffer, stderr: string | Buffer) => void;

/** An API answer, as the daemon gives it (docs/api.md). */
export type Answer = Record<string, any>;

export declare class Client {
  constructor(options?: ClientOptions);
  /** The daemon's socket, made absolute (see ClientOptions.socket). */
  readonly socket: string;
  readonly lineage: string;
  request(method: string, path: string, body?: unknown): Promise<any>;
  status(): Promise<Answer>;
  /** Opens a session; owner's end closes it, keep are its first keep rules (PID@START, root:PID@START, exe:PATH); an unknown option is a TypeError. */
  openSession(options?: {
    id?: string; kind?: string; label?: string; parent?: string;
    owner?: string | Identity | [number, number]; keep?: string[]; selfClose?: boolean;
  }): Promise<Answer>;
  /** A session by its id; an empty id rejects with a TypeError, as do turnEnd, sessionClose and report. */
  session(id: string): Promise<Answer>;
  turnEnd(id: string): Promise<Answer>;
  sessionClose(id: string): Promise<Answer>;
  report(id: string): Promise<Answer>;
  keep(identity: string | Identity | [number, number], options?: { ttl?: number | string; root?: boolean }): Promise<Answer>;
  /** The live members of root's lineage that hold any of pipes (inodes), or the other end of any of sockets (this process's ends' inodes). */
  holders(root: string | Identity, pipes?: number[], sockets?: number[]): Promise<Answer>;
  /** Ends one root's lineage (a deadline: reaped, keeps spared) and forgets it. */
  endRoot(root: string | Identity, event?: 'deadline' | 'root-exit'): Promise<Answer>;
  /** The events of a session (or every session, uid 0); with a session, ends when it closes. */
  events(session?: string): AsyncGenerator<Answer, void, undefined>;
  /**
   * Runs file with args as a root of options.session, in execFile's
   * shape. It returns once the command itself has exited and its pipes
   * ended, or holdDelay later, whoever holds them, with everything written
   * until then and the holders named.
   */
  run(file: string, args: string[], options: RunOptions, callback: RunCallback): RunChild;
  run(file: string, options: RunOptions, callback: RunCallback): RunChild;
  run(file: string, args: string[], options: RunOptions & { encoding: 'buffer' | null }): Promise<RunResult<Buffer>> & { child: RunChild };
  run(file: string, args: string[], options: RunOptions): Promise<RunResult<string>> & { child: RunChild };
  run(file: string, options: RunOptions): Promise<RunResult<string>> & { child: RunChild };
}
