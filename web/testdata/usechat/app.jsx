// A chat page built the way README's useChat snippet says, with the AI
// SDK's own useChat (@ai-sdk/react) against trawl's demo agent on
// another origin. web/usechat_test.go bundles it with esbuild and drives
// it in headless Chromium through window.chat: send, regenerate (Retry),
// sendMessage with a messageId (Edit), stop wired to the stop endpoint,
// and a message sent while a turn runs (replace: true).
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';
import { createRoot } from 'react-dom/client';

const q = new URLSearchParams(location.search);
const TRAWL = q.get('trawl');
const chatId = q.get('chat');
const sessionToken = q.get('token');

// README's snippet, as written there.
const api = `${TRAWL}/v1/agents/demo/chat`;
const headers = { Authorization: `Bearer ${sessionToken}` };

function App() {
  const chat = useChat({
    id: chatId,
    transport: new DefaultChatTransport({
      api,
      headers,
      body: { replace: true }, // a message sent while a turn runs stops it and takes its place
    }),
  });
  // stop() ends the request; the turn runs on (it can be resumed), so
  // end it on the server too.
  const stop = () => Promise.all([chat.stop(), fetch(`${api}/${chatId}/stop`, { method: 'POST', headers })]);

  window.chat = {
    messages: chat.messages,
    status: chat.status,
    error: chat.error ? String(chat.error.message || chat.error) : '',
    sendMessage: chat.sendMessage,
    regenerate: chat.regenerate,
    stop,
  };
  return (
    <div id="app" data-status={chat.status}>
      <ol id="messages">
        {chat.messages.map((m) => (
          <li key={m.id} data-id={m.id} data-role={m.role}>
            {m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('')}
          </li>
        ))}
      </ol>
      {chat.error ? <p id="error">{String(chat.error.message || chat.error)}</p> : null}
    </div>
  );
}

createRoot(document.getElementById('root')).render(<App />);
