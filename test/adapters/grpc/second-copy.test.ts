/**
 * An application whose @grpc/grpc-js is another copy than the one dialguard imports (two
 * versions installed, not deduplicated): its credentials are not the ChannelCredentials class
 * dialguard's copy checks for. grpc-js refused them with "Channel credentials must be a
 * ChannelCredentials object", which named neither the cause nor the fix (an outside review).
 * The guard now says so when it is handed them. A real second copy: grpc-js's files copied to a
 * temporary node_modules, its own dependencies linked.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';

const require = createRequire(import.meta.url);

/** A second copy of @grpc/grpc-js, loaded from its own directory (removed after). */
function secondCopy(): { other: typeof grpc; remove: () => void } {
  const real = path.dirname(require.resolve('@grpc/grpc-js/package.json'));
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dialguard-grpc-copy-'));
  const modules = path.join(root, 'node_modules');
  fs.cpSync(real, path.join(modules, '@grpc', 'grpc-js'), { recursive: true, dereference: true });
  for (const dep of ['@grpc/proto-loader', '@js-sdsl/ordered-map']) {
    const target = path.join(modules, dep);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.symlinkSync(path.dirname(require.resolve(`${dep}/package.json`, { paths: [real] })), target, 'dir');
  }
  const other = createRequire(path.join(root, 'index.js'))('@grpc/grpc-js') as typeof grpc;
  return { other, remove: () => fs.rmSync(root, { recursive: true, force: true }) };
}

describe('GrpcGuard: credentials from a second copy of @grpc/grpc-js', () => {
  it('a client built with them fails at construction with a TypeError naming the two copies and the fix (was: "Channel credentials must be a ChannelCredentials object")', () => {
    const { other, remove } = secondCopy();
    const guard = new GrpcGuard({ breaker: null });
    try {
      expect(other.credentials.createInsecure()).not.toBeInstanceOf(grpc.ChannelCredentials); // it is another copy
      const construct = () => new other.Client('127.0.0.1:1', other.credentials.createInsecure(), guard.clientOptions());
      expect(construct).toThrow(TypeError);
      expect(construct).toThrow(/another copy of @grpc\/grpc-js.*npm ls @grpc\/grpc-js/s);
      // The same credentials of dialguard's own copy are taken.
      new grpc.Client('127.0.0.1:1', grpc.credentials.createInsecure(), guard.clientOptions()).close();
      // Not credentials at all: the plain message.
      expect(() => guard.channel('127.0.0.1:1', {} as grpc.ChannelCredentials)).toThrow(/^credentials must be grpc ChannelCredentials/);
    } finally {
      remove();
      void guard.close();
    }
  });
});
