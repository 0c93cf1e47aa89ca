/**
 * A name refused from memory (every address it resolved to open) is looked up again 100 ms after
 * its lookup, by one caller at a time: a deploy that moves the name to a new address is served at
 * once, not after ADDRESS_RECHECK (1 s; an outside review: guarded clients were served again up
 * to a second after plain ones, 135 failed calls against 121). A resolver that is slow to answer
 * gets one lookup out at a time, not one per recheck. Real sockets on loopback; the clock is
 * injected.
 */
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { HostUnavailableError } from '../../src/core/errors.js';
import { ADDRESS_RECHECK } from '../../src/guard/addresses.js';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { echoPeer } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

/**
 * A lookup whose answer the test switches (`to`), counting its calls; `hold` keeps it from
 * answering; `fail` makes it answer with that error code (undefined: addresses again).
 */
function switchableLookup(first: string): {
  lookup: net.LookupFunction;
  calls: () => number;
  to: (address: string) => void;
  hold: () => () => void;
  fail: (code: string | undefined) => void;
} {
  let address = first;
  let calls = 0;
  let held: Array<() => void> | undefined;
  let failing: string | undefined;
  const lookup = ((_host: string, _options: unknown, callback: (err: Error | null, list?: Array<{ address: string; family: number }>) => void) => {
    calls++;
    const answer = [{ address, family: 4 }];
    const code = failing;
    const reply = (): void => (code === undefined ? callback(null, answer) : callback(Object.assign(new Error(`getaddrinfo ${code} svc.test`), { code })));
    if (held !== undefined) held.push(reply);
    else queueMicrotask(reply);
  }) as unknown as net.LookupFunction;
  return {
    lookup,
    calls: () => calls,
    to: (a) => {
      address = a;
    },
    fail: (code) => {
      failing = code;
    },
    hold: () => {
      held = [];
      return () => {
        const replies = held ?? [];
        held = undefined;
        for (const r of replies) r();
      };
    },
  };
}

/**
 * `svc.test` on a port nothing listens on at 127.0.0.2 (its dials refused), answered 127.0.0.2 by a
 * switchable lookup; with `live`, a server on 127.0.0.3 at that port (the address a deploy moves it
 * to). A breaker on a manual clock.
 */
async function scene(o: { live: boolean; failureThreshold: number; openDuration: number; timeout: number }) {
  const peer = await echoPeer({ host: '127.0.0.3' });
  if (o.live) cleanup.push(() => peer.close());
  else await peer.close();
  const clock = new ManualClock(1_000);
  const breaker = new HostBreaker({ clock, failureThreshold: o.failureThreshold, minOutage: 0, openDuration: o.openDuration });
  const dns = switchableLookup('127.0.0.2');
  const target = { host: 'svc.test', port: peer.port };
  const options = { breaker, clock, timeout: o.timeout, socket: { lookup: dns.lookup } };
  return { clock, breaker, dns, target, options };
}

describe('a name refused on its old answer is looked up again soon, one lookup at a time', () => {
  it('moved to a live address: served 100 ms after its lookup, where it was refused for a second', async () => {
    const { clock, breaker, dns, target, options } = await scene({ live: true, failureThreshold: 1, openDuration: 60_000, timeout: 1_000 });
    await expect(connect(target, options)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError);
    dns.to('127.0.0.3'); // the deploy: the name now answers the new pod
    clock.advance(99);
    await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError);
    expect(dns.calls()).toBe(1); // refused from memory: no lookup
    clock.advance(1);
    // One caller looks the name up again; one beside it, while that lookup is out, is refused from memory.
    const first = connect(target, options);
    await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError);
    const socket = await first; // was HostUnavailableError until ADDRESS_RECHECK
    expect(socket.remoteAddress).toBe('127.0.0.3');
    socket.destroy();
    expect(dns.calls()).toBe(2);
    // The new answer is remembered: every later call dials the live address.
    const again = await connect(target, options);
    expect(again.remoteAddress).toBe('127.0.0.3');
    again.destroy();
    expect(breaker.stats().failed).toBe(1); // the one dial of the old address
  });

  it('the same answer again: refused after the lookup, and the next lookup waits 100 ms more', async () => {
    const { clock, breaker, dns, target, options } = await scene({ live: true, failureThreshold: 1, openDuration: 60_000, timeout: 1_000 });
    await expect(connect(target, options)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    for (let round = 0; round < 3; round++) {
      clock.advance(100);
      await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError); // looked up, still dead
      expect(dns.calls()).toBe(round + 2);
      clock.advance(50);
      for (let i = 0; i < 5; i++) await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError);
      expect(dns.calls()).toBe(round + 2); // within 100 ms of the last lookup: from memory
    }
    expect(breaker.stats().failed).toBe(1); // refused, never dialled again: its window is 60 s
  });

  it('a resolver slow to answer: one lookup out until ADDRESS_RECHECK after the answer, however many refusals meanwhile', async () => {
    const { clock, breaker, dns, target, options } = await scene({ live: false, failureThreshold: 1, openDuration: 60_000, timeout: 5_000 });
    await expect(connect(target, options)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    clock.advance(100);
    const release = dns.hold();
    const slow = connect(target, options); // the lookup that does not answer
    await flushMicrotasks();
    expect(dns.calls()).toBe(2);
    // Not awaited one by one: a call that went to look up again would wait on the held lookup.
    const meanwhile: Array<Promise<unknown>> = [];
    for (let t = 0; t < 8; t++) {
      clock.advance(t === 7 ? ADDRESS_RECHECK - 800 - 1 : 100); // 200 ... 800 ms since the answer, then 999
      meanwhile.push(connect(target, options).catch((err: unknown) => err));
      await flushMicrotasks();
      expect(dns.calls()).toBe(2); // was one more each 100 ms with a plain recheck interval
    }
    for (const err of await Promise.all(meanwhile)) expect(err).toBeInstanceOf(HostUnavailableError);
    clock.advance(1);
    const late = connect(target, options); // a second out only once ADDRESS_RECHECK has passed since the answer
    await flushMicrotasks();
    expect(dns.calls()).toBe(3);
    release();
    await expect(slow).rejects.toBeInstanceOf(HostUnavailableError); // answered: still the dead address, open
    await expect(late).rejects.toBeInstanceOf(HostUnavailableError);
    expect(breaker.stats().failed).toBe(1);
  });

  it("an address whose window ended: one caller looks the name up and probes it, the others are refused from memory until that lookup answers", async () => {
    const { clock, breaker, dns, target, options } = await scene({ live: false, failureThreshold: 1, openDuration: 500, timeout: 5_000 });
    await expect(connect(target, options)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError); // refused from memory
    clock.advance(500); // 127.0.0.2's window ends: half-open, no probe out
    const release = dns.hold();
    const calls = Array.from({ length: 5 }, () => connect(target, options).catch((err: unknown) => err));
    await flushMicrotasks();
    expect(dns.calls()).toBe(2); // one caller's lookup; was one per caller (6), each admitting and abandoning the probe
    expect(breaker.stats()).toMatchObject({ probesGranted: 1, abandoned: 1 });
    release();
    const [first, ...others] = await Promise.all(calls);
    expect(first).toMatchObject({ code: 'ECONNREFUSED' }); // its answer came, it probed: still dead
    for (const err of others) expect(err).toBeInstanceOf(HostUnavailableError);
    expect(breaker.stats()).toMatchObject({ failed: 2, probesGranted: 2 }); // the first dial and the one probe
  });

  it('a lookup that fails while the name is refused: the others are refused from memory, no lookup each, until ADDRESS_RECHECK after the answer', async () => {
    // Two failures to open: the lookup's one ENOTFOUND leaves the name's own entry closed.
    const { clock, dns, target, options } = await scene({ live: false, failureThreshold: 2, openDuration: 500, timeout: 5_000 });
    for (let i = 0; i < 2; i++) await expect(connect(target, options)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError);
    expect(dns.calls()).toBe(2);
    dns.fail('ENOTFOUND');
    clock.advance(100);
    await expect(connect(target, options)).rejects.toMatchObject({ code: 'ENOTFOUND' }); // the recheck's lookup
    expect(dns.calls()).toBe(3);
    // 150 ... 950 ms after the answer: the address's window ends at 500 (half-open from then)
    for (const at of [150, 300, 550, 700, 999]) {
      clock.advance(at - (clock.now() - 1_000));
      await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError);
    }
    expect(dns.calls()).toBe(3); // was one a call from the window's end (an outside review: 20 callers, 1 200 lookups a second)
    clock.advance(1);
    await expect(connect(target, options)).rejects.toMatchObject({ code: 'ENOTFOUND' }); // ADDRESS_RECHECK after the answer: looked up
    expect(dns.calls()).toBe(4);
  });

  it('the caller that looks the name up gives up before the answer: the answer is still kept, and the next caller dials the new address', async () => {
    // Two failures to open: the short caller's timed-out lookup leaves the name's own entry closed.
    const { clock, dns, target, options } = await scene({ live: true, failureThreshold: 2, openDuration: 60_000, timeout: 1_000 });
    for (let i = 0; i < 2; i++) await expect(connect(target, options)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError);
    dns.to('127.0.0.3'); // the deploy
    clock.advance(100);
    const release = dns.hold();
    const short = connect(target, { ...options, timeout: 20 }); // its deadline nearly spent: it looks the name up, then leaves
    await flushMicrotasks();
    expect(dns.calls()).toBe(3);
    clock.advance(20);
    await expect(short).rejects.toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT' });
    await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError); // its lookup is still out
    release(); // the answer comes after its caller left
    const next = await connect(target, options); // was refused until ADDRESS_RECHECK after the old answer (r118: 1-2.7 s)
    expect(next.remoteAddress).toBe('127.0.0.3');
    next.destroy();
  });

  it('a late answer with the same addresses: one caller goes on at a window\'s end, not each (the refusal is kept)', async () => {
    // Two failures to open: a timed-out lookup leaves the name's own entry closed.
    const { clock, dns, target, options } = await scene({ live: false, failureThreshold: 2, openDuration: 500, timeout: 1_000 });
    for (let i = 0; i < 2; i++) await expect(connect(target, options)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(connect(target, options)).rejects.toBeInstanceOf(HostUnavailableError);
    clock.advance(500); // half-open, no probe out
    let release = dns.hold();
    const short = connect(target, { ...options, timeout: 20 }); // let through; its lookup outlasts it
    await flushMicrotasks();
    clock.advance(20);
    await expect(short).rejects.toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT' });
    expect(dns.calls()).toBe(3);
    release(); // the late answer: the same address
    release = dns.hold();
    const calls = Array.from({ length: 5 }, () => connect(target, options).catch((err: unknown) => err));
    await flushMicrotasks();
    expect(dns.calls()).toBe(4); // one goes on; was one each (8): the late answer had dropped the refusal
    release();
    const [first, ...others] = await Promise.all(calls);
    expect(first).toMatchObject({ code: 'ECONNREFUSED' }); // it probed: still dead
    for (const err of others) expect(err).toBeInstanceOf(HostUnavailableError);
  });
});
