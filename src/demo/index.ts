/**
 * `dialguard demo`: the incidents dialguard exists for, replayed on embedded peers on loopback,
 * unguarded and guarded side by side. No setup, no privileges, about 30 seconds.
 *
 * @module
 */
import { renderTable } from '../cli/table.js';
import { deadConnectionScene } from './dead-connection-scene.js';
import { deadHostScene } from './dead-host-scene.js';
import { fetchScene } from './fetch-scene.js';

/** A scene: a title, what it shows, and how to run it. */
interface Scene {
  name: string;
  title: string;
  story: string;
  run: (log: (line: string) => void) => Promise<string>;
}

const scenes: Scene[] = [
  {
    name: 'dead-host',
    title: 'A proxy pod is gone (seed 000)',
    story:
      'Every request names a host that no longer answers SYNs. Unguarded, each request pays six connect\n' +
      'timeouts and the next request pays them again. Guarded, three failed dials open the host\'s breaker;\n' +
      'later requests are refused in microseconds, and one probe dial resumes traffic once it is back.',
    run: async (log) => renderTable('dead host, per request', (await deadHostScene({ log })).rows),
  },
  {
    name: 'dead-connection',
    title: 'Requests queued on a dead connection (seed 003)',
    story:
      'An HTTP/2 peer dies and its address goes dark while requests keep arriving. Raw node:http2 queues them\n' +
      'behind a new connect that has no timeout, so they wait for the kernel. The guarded client shares one\n' +
      'bounded dial among them all, releases them together, stops dialling once the breaker opens, and\n' +
      'resumes with one probe when the peer is back.',
    run: async (log) => renderTable('requests queued on a dead connection', (await deadConnectionScene({ log })).rows),
  },
  {
    name: 'fetch',
    title: "Node's fetch against a dead origin (issue 5)",
    story:
      'The origin stops answering SYNs. Raw fetch with AbortSignal.timeout pays the timeout on every call and\n' +
      'dials again each time. With a GuardedAgent as its dispatcher, three failed dials open the breaker; later\n' +
      'fetches reject at once with HostUnavailableError as their cause, and one probe dial resumes traffic.',
    run: async (log) => renderTable('fetch against a dead origin', (await fetchScene({ log })).rows),
  },
];

/** The scene names, in the order they run. */
export const sceneNames: readonly string[] = scenes.map((s) => s.name);

/** Runs the named scenes (all when none are named), printing progress and a table per scene. */
export async function runDemo(names: readonly string[], out: (text: string) => void = (t) => process.stdout.write(t)): Promise<void> {
  const chosen = names.length === 0 ? scenes : scenes.filter((s) => names.includes(s.name));
  const unknown = names.filter((n) => !scenes.some((s) => s.name === n));
  if (unknown.length > 0) throw new Error(`no demo scene named ${unknown.join(', ')}; scenes: ${scenes.map((s) => s.name).join(', ')}`);
  const started = performance.now();
  for (const scene of chosen) {
    out(`\n=== ${scene.title} ===\n${scene.story}\n\n`);
    const table = await scene.run((line) => out(`  ${((performance.now() - started) / 1_000).toFixed(1).padStart(5)} s  ${line}\n`));
    out(table);
  }
  out(`\ndone in ${((performance.now() - started) / 1_000).toFixed(1)} s\n`);
}
