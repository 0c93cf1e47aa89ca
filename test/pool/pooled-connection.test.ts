/**
 * PooledConnection's list of rides: leases counted as rides come and go in any order, a ride
 * taken off twice or never put on changes nothing, and a connection found dead releases every
 * ride on it, each once.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConnectionGoneError } from '../../src/core/errors.js';
import { PooledConnection, Ride } from '../../src/pool/pooled-connection.js';

describe('PooledConnection: the rides on it', () => {
  it('counts leases whatever the order rides come and go in', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.nat(15)), { maxLength: 200 }), (ops) => {
        const conn = new PooledConnection(1, 't', {}, 0);
        const rides = Array.from({ length: 16 }, () => new Ride(conn, 1));
        const model = new Set<Ride<object>>();
        for (const [add, i] of ops) {
          const ride = rides[i]!;
          if (add) {
            conn.addRide(ride);
            model.add(ride);
          } else {
            conn.removeRide(ride);
            model.delete(ride);
          }
          expect(conn.leases).toBe(model.size);
        }
        expect(new Set(conn.rides())).toEqual(model);
      }),
      { numRuns: 200 },
    );
  });

  it('a dead connection releases every ride on it once, with the same ConnectionGoneError', () => {
    const conn = new PooledConnection(7, 't', {}, 0);
    const released: unknown[] = [];
    const rides = Array.from({ length: 5 }, () => {
      const ride = new Ride(conn, 1);
      ride.onRelease = (reason) => {
        released.push(reason);
        conn.removeRide(ride); // as the pool does when the ride ends
      };
      conn.addRide(ride);
      return ride;
    });
    expect(conn.markGone(new Error('reset'))).toBe(true);
    expect(released).toHaveLength(5);
    expect(new Set(released).size).toBe(1);
    expect(released[0]).toBeInstanceOf(ConnectionGoneError);
    expect(conn.leases).toBe(0);
    expect(conn.markGone(new Error('again'))).toBe(false);
    for (const ride of rides) expect(ride.released).toBe(released[0]);
  });
});
