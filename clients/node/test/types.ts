// Checked by `tsc --noEmit` (never run): the declarations in index.d.ts
// describe the API as a TypeScript host uses it.
import { Client, Holder, LineageError, RunError, DEFAULT_HOLD_DELAY_MS } from '../index';

async function host(): Promise<void> {
  const c = new Client({ socket: '/run/lineage/lineage.sock' });
  const st = await c.status();
  const api: number = st.api;
  const res = await c.run('sh', ['-c', 'echo built; sleep 90 &'], { session: 'turn-7', kind: 'autonomous', holdDelay: DEFAULT_HOLD_DELAY_MS });
  const out: string = res.stdout;
  const held: Holder[] = res.holders;
  const first: string | undefined = held[0]?.identity;
  const raw = await c.run('cat', [], { session: 'turn-7', encoding: 'buffer', input: Buffer.from('x') });
  const bytes: Buffer = raw.stdout;
  const child = c.run('make', ['test'], { session: 'turn-7', timeout: 60_000 }, (err: RunError | null, stdout, stderr) => {
    if (err && err.killed) console.log(err.holders, err.root, stdout, stderr);
    if (err instanceof LineageError) console.log(err.code, err.status, err.stderr);
  });
  child.on('exit', (code) => console.log(code, child.root));
  for await (const ev of c.events('turn-7')) {
    if (ev.kind === 'end') break;
  }
  await c.turnEnd('turn-7');
  await c.keep({ pid: 1234, start: 5678 }, { ttl: '30m' });
  try {
    await c.sessionClose('turn-7');
  } catch (e) {
    if (e instanceof LineageError) console.log(e.code, e.status, api, out, first, bytes);
  }
}

void host;
