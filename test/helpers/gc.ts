/**
 * Full garbage collections from inside a test, for reachability checks with WeakRefs.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/**
 * Collects garbage three times, each on a turn of its own: a WeakRef made in a turn keeps its
 * target alive until that turn ends.
 */
export async function collectGarbage(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
}
