/**
 * undici's own connect options, honoured by the guarded connector: a {@link GuardedAgent} takes
 * `undici.connect` (an object of socket and TLS options, or a connector function),
 * `undici.connectTimeout`, `undici.socketPath`, `undici.autoSelectFamily`,
 * `undici.autoSelectFamilyAttemptTimeout` and `undici.maxCachedSessions` with undici's meaning,
 * rather than refusing them, so code written for undici's `Agent` keeps working.
 *
 * @module
 */
import type { Agent } from 'undici';
import { checkDuration, show } from '../../core/validate.js';
import { checkSocketNumbers, type GuardedConnectorOptions, type GuardedSocketOptions, type GuardedTlsOptions, SOCKET_KEYS, TLS_KEYS, type UndiciConnector } from './connector.js';

/** Top-level undici Agent options that configure undici's own connector. */
const TOP_LEVEL = ['connect', 'connectTimeout', 'socketPath', 'autoSelectFamily', 'autoSelectFamilyAttemptTimeout', 'maxCachedSessions'] as const;

type Options = Omit<Agent.Options, 'headersTimeout' | 'bodyTimeout'>;

/**
 * Splits undici Agent options into those the Agent keeps (`rest`) and the guarded connector's
 * (`connector`), undici's meaning kept: `connect.timeout` / `connectTimeout` 0 is no limit, a
 * `null` is the default, `keepAlive: false` turns keep-alive probes off.
 *
 * @throws TypeError naming an option the guarded connector cannot honour.
 */
export function undiciConnectOptions(options: Options): { rest: Options; connector: GuardedConnectorOptions } {
  const rest: Record<string, unknown> = { ...options };
  for (const key of TOP_LEVEL) delete rest[key];
  const connector: GuardedConnectorOptions = {};
  const socket: Record<string, unknown> = {};
  const tls: Record<string, unknown> = {};
  const set = (key: keyof GuardedConnectorOptions, value: unknown): void => {
    if (value !== undefined && value !== null) (connector as Record<string, unknown>)[key] = value;
  };
  // Checked here, under the name the user gave: the connector would name its own `connectTimeout`.
  const timeout = (name: string, value: unknown): void => set('connectTimeout', value === undefined || value === null ? value : checkDuration(name, value));
  timeout('undici.connectTimeout', options.connectTimeout);
  set('socketPath', options.socketPath);
  set('maxCachedSessions', options.maxCachedSessions);
  if (options.autoSelectFamily !== undefined) socket['autoSelectFamily'] = options.autoSelectFamily;
  if (options.autoSelectFamilyAttemptTimeout !== undefined) socket['autoSelectFamilyAttemptTimeout'] = options.autoSelectFamilyAttemptTimeout;
  const connect = options.connect as unknown;
  if (typeof connect === 'function') {
    connector.connector = connect as UndiciConnector;
  } else if (connect !== undefined && connect !== null) {
    if (typeof connect !== 'object') throw new TypeError(`undici.connect must be an object or a function, got ${show(connect)}`);
    for (const [key, value] of Object.entries(connect)) {
      if (value === undefined) continue;
      if (SOCKET_KEYS.has(key)) socket[key] = value;
      else if (TLS_KEYS.has(key)) tls[key] = value;
      else if (key === 'timeout') timeout('undici.connect.timeout', value);
      // undici's own connector overwrites both (its session cache, ALPN from allowH2): taken, as there.
      else if (key === 'session' || key === 'ALPNProtocols') continue;
      else if (key === 'socketPath') set('socketPath', value);
      else if (key === 'maxCachedSessions') set('maxCachedSessions', value);
      else if (key === 'keepAliveInitialDelay') set('keepAliveInitialDelay', value);
      else if (key === 'allowH2') set('allowH2', value);
      else if (key === 'keepAlive') {
        if (value === false) connector.keepAliveInitialDelay = 0;
      } else {
        throw new TypeError(`undici.connect.${key} is not supported by the guarded connector`);
      }
    }
  }
  checkSocketNumbers('undici.connect', socket);
  if (Object.keys(socket).length > 0) connector.socket = socket as GuardedSocketOptions;
  if (Object.keys(tls).length > 0) connector.tls = tls as GuardedTlsOptions;
  return { rest: rest as Options, connector };
}
