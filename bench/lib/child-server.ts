/**
 * A server in a child process, so the clients a bench measures do not share its event loop (two
 * cores: one for the clients, one for the server).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';

/**
 * Starts `node -e source`; `source` must print the port it listens on, then a newline. Resolves
 * with that port and a stop function that waits for the child to exit.
 */
export async function childServer(source: string): Promise<{ port: number; stop: (signal?: NodeJS.Signals) => Promise<void> }> {
  const child = spawn(process.execPath, ['-e', source], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  const [chunk] = (await once(child.stdout, 'data')) as [Buffer];
  return {
    port: Number(String(chunk).trim()),
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}
