// The SSE reader both views use on fetch() bodies: the turn stream (a POST, which
// EventSource cannot make) and the Playground's chat stream. Protocol only, no DOM.

/**
 * Incremental SSE parser for fetch() bodies (EventSource cannot POST). A comment
 * line (`: text`) goes to onComment when the caller gives one, else it is ignored.
 */
export function sseParser(onEvent, onComment) {
  let buffer = '', name = '', data = [];
  return (chunk) => {
    buffer += chunk;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop();
    for (const line of lines) {
      if (line === '') {
        if (data.length) onEvent(name || 'message', data.join('\n'));
        name = ''; data = [];
      } else if (line.startsWith(':')) {
        if (onComment) onComment(line.slice(1).replace(/^ /, ''));
      } else {
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        let value = i < 0 ? '' : line.slice(i + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'event') name = value;
        else if (field === 'data') data.push(value);
      }
    }
  };
}

/**
 * Reads a fetch() body as SSE, for both views: true when it ended, false when a
 * read failed or was aborted. dispatchTail also dispatches a last event left
 * without its blank line (the turn stream's rule; the chat stream's is not).
 * beforeChunk runs as each chunk arrives, before its events; onComment gets the
 * stream's comment lines (the proxy's `: t=` stamps), which are otherwise ignored.
 */
export async function readSse(response, onEvent, { afterChunk, dispatchTail, beforeChunk, onComment } = {}) {
  const feed = sseParser(onEvent, onComment);
  const decoder = new TextDecoder();
  try {
    const reader = response.body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (beforeChunk) beforeChunk();
      feed(decoder.decode(value, { stream: true }));
      if (afterChunk) afterChunk();
    }
    feed(decoder.decode() + (dispatchTail ? '\n\n' : ''));
    return true;
  } catch (_) {
    return false;
  }
}
