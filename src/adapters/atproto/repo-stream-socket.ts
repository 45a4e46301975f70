// The socket the repo event stream reads through: a small port (open, message, close) so the stream's logic can be
// driven by a fake in tests, and its default, Node's global WebSocket (Node 22 and later have one; no dependency).
//
// A WHATWG WebSocket cannot be paused, so the stream's back-pressure is to close it and resume from a cursor; close()
// here removes every listener and resolves once the socket is gone (or after a bounded wait for a server that never
// answers the closing handshake), so a closed stream leaves no socket, listener or timer behind.

import { RepoStreamError } from './repo-stream-frames.ts';

/** What a socket reports. After `close` nothing more is reported. */
export interface StreamSocketHandlers {
  open(): void;
  message(data: Uint8Array | string): void;
  close(code: number, reason: string): void;
}

/** One connection. `close` stops every report at once and resolves when the connection is gone. */
export interface StreamSocket {
  close(): Promise<void>;
}

export type StreamSocketFactory = (url: string, on: StreamSocketHandlers) => StreamSocket;

/** How long close() waits for a server to answer the closing handshake. */
const CLOSE_WAIT_MS = 2000;

/** The default socket: Node's global WebSocket (Node ≥ 22), binary frames as bytes. */
export const webSocketFactory: StreamSocketFactory = (url, on) => {
  const WS = globalThis.WebSocket;
  if (typeof WS !== 'function')
    throw new RepoStreamError('REPO_STREAM_UNAVAILABLE', 'this Node has no global WebSocket (Node 22 or later has)');
  const ws = new WS(url);
  ws.binaryType = 'arraybuffer';
  let closed = false;
  let settle: () => void = () => undefined;
  const gone = new Promise<void>((resolve) => (settle = resolve));
  const onOpen = () => on.open();
  const onMessage = (ev: MessageEvent) => {
    const data: unknown = ev.data;
    on.message(data instanceof ArrayBuffer ? new Uint8Array(data) : typeof data === 'string' ? data : '');
  };
  const detach = () => {
    ws.removeEventListener('open', onOpen);
    ws.removeEventListener('message', onMessage);
    ws.removeEventListener('close', onClose);
    ws.removeEventListener('error', onError);
    settle();
  };
  const onClose = (ev: CloseEvent) => {
    detach();
    if (!closed) on.close(ev.code, ev.reason);
  };
  // An error is always followed by a close event, which reports it.
  const onError = () => undefined;
  ws.addEventListener('open', onOpen);
  ws.addEventListener('message', onMessage);
  ws.addEventListener('close', onClose);
  ws.addEventListener('error', onError);
  return {
    close() {
      closed = true;
      if (ws.readyState === WS.CLOSED) detach();
      else {
        ws.close();
        // A server that never answers the closing handshake does not hold close() up.
        const giveUp = setTimeout(detach, CLOSE_WAIT_MS);
        void gone.then(() => clearTimeout(giveUp));
      }
      return gone;
    },
  };
};
