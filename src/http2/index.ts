/**
 * dialguard/http2: an HTTP/2 client on `node:http2` with one guarded, watched session per
 * origin. See {@link Http2Client}.
 *
 * @module
 */
export { Http2Client, type Http2ClientEvents, type Http2ClientOptions, type Http2RequestOptions, type Http2Response, type Http2SessionLimits, type Http2StreamOptions, type Http2StreamingResponse } from './client.js';
export { retriesOf } from '../retry/story.js';
