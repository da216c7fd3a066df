package agent

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// TokenCounter counts the tokens a model's tokenizer makes of a text.
// Implementations must be safe for concurrent use; a count never fails
// (text that is not UTF-8 is counted as its bytes would be sent).
type TokenCounter interface {
	CountTokens(text string) int
}

// Per-message framing of OpenAI's chat format, as its own cookbook counts
// it ("How to count tokens with tiktoken"): every message costs three
// tokens besides its content, and the reply is primed with three more.
const (
	tokensPerMessage = 3
	tokensReplyPrime = 3
)

// TokenizerFor returns the tokenizer of model's family when trawl knows it
// — OpenAI's o200k_base for gpt-4o*, gpt-4.1*, gpt-4.5*, gpt-5*, o1*,
// o3*, o4*, chatgpt-4o*; cl100k_base for gpt-4* (the older ones) and
// gpt-3.5* — with ok false for every other model, whose tokens only its
// server's reported usage can tell. The name is matched like
// ContextWindow's (case-insensitive, after any "provider/" prefix). The
// encodings are embedded (github.com/tiktoken-go/tokenizer): no file is
// fetched, and each is built once per process, on first use (some
// hundreds of milliseconds and some tens of megabytes for o200k_base,
// of which about 5.8 MB are trawl's copy of its ranks, kept free of
// pointers so that no garbage collection walks it). Texts are split by
// a hand-written matcher of the encoding's pattern, not regexp2 (bpe.go):
// the same counts, 8–20 times faster (bench/README.md).
func TokenizerFor(model string) (TokenCounter, bool) {
	enc, ok := encodingFor(model)
	if !ok {
		return nil, false
	}
	return bpeCounter(enc), true
}

func encodingFor(model string) (tokenizer.Encoding, bool) {
	name := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	has := func(prefixes ...string) bool {
		for _, p := range prefixes {
			if name == p || strings.HasPrefix(name, p+"-") || strings.HasPrefix(name, p+".") || strings.HasPrefix(name, p+":") {
				return true
			}
		}
		return false
	}
	switch {
	case has("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "gpt-oss"):
		return tokenizer.O200kBase, true
	case has("gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada"):
		return tokenizer.Cl100kBase, true
	}
	return "", false
}

// encodings holds one bpeEncoding per encoding: reading its ranks is
// done once per process.
var encodings sync.Map // tokenizer.Encoding → *encodingOnce

type encodingOnce struct {
	once sync.Once
	enc  *bpeEncoding
}

type bpe struct{ e *encodingOnce }

func bpeCounter(enc tokenizer.Encoding) bpe {
	v, _ := encodings.LoadOrStore(enc, &encodingOnce{})
	e := v.(*encodingOnce)
	e.once.Do(func() {
		b, err := newBPE(enc)
		if err != nil { // only for an encoding the module lacks: encodingFor names none
			panic("agent: tokenizer " + string(enc) + ": " + err.Error())
		}
		e.enc = b
	})
	return bpe{e}
}

func (b bpe) CountTokens(text string) int { return b.e.enc.count(text) }

// TokenMemo counts texts through a TokenCounter and keeps each count, so a
// text sent at every step (the thread's older messages, the tools) is
// tokenized once. It keeps the counts of at most max texts (then starts
// afresh), by a 64-bit hash of each text — not the texts themselves, so
// what it holds is a few bytes a text; it is safe for concurrent use.
type TokenMemo struct {
	tc            TokenCounter
	max           int
	seed, msgSeed maphash.Seed

	mu     sync.Mutex
	counts map[uint64]int
}

// NewTokenMemo returns a memo over tc keeping at most max counts (zero
// means 65,536).
func NewTokenMemo(tc TokenCounter, max int) *TokenMemo {
	if max <= 0 {
		max = 1 << 16
	}
	return &TokenMemo{tc: tc, max: max, seed: maphash.MakeSeed(), msgSeed: maphash.MakeSeed(), counts: map[uint64]int{}}
}

// CountTokens implements TokenCounter. Texts under 64 bytes are counted
// each time: tokenizing them costs about what hashing them would.
func (m *TokenMemo) CountTokens(text string) int {
	if len(text) < 64 {
		return m.tc.CountTokens(text)
	}
	return m.keep(maphash.String(m.seed, text), func() int { return m.tc.CountTokens(text) })
}

// RequestTokens is RequestTokens(m's counter, req), each message and tool
// counted once (kept by a hash of all it holds), so that a step sending
// the thread again tokenizes only what is new in it.
func (m *TokenMemo) RequestTokens(req *ModelRequest) int {
	n := tokensReplyPrime
	for i := range req.Messages {
		n += m.MessageTokens(&req.Messages[i])
	}
	for i := range req.Tools {
		t := &req.Tools[i]
		var buf [160]byte
		b := m.appendText(m.appendText(append(buf[:0], 2), t.Name), t.Description)
		b = binary.LittleEndian.AppendUint64(b, maphash.Bytes(m.seed, t.Parameters))
		n += m.keep(maphash.Bytes(m.msgSeed, b), func() int { return ToolTokens(m.tc, t) })
	}
	return n
}

// MessageTokens is MessageTokens(m's counter, msg), kept by a hash of
// all msg holds.
func (m *TokenMemo) MessageTokens(msg *Message) int {
	return m.keep(m.messageKey(msg), func() int { return MessageTokens(m.tc, msg) })
}

// messagesTokens sets out[i] to MessageTokens(msgs[i]), looking all of
// them up under one lock.
func (m *TokenMemo) messagesTokens(msgs []*Message, out []int) {
	var keys [tokenBatch]uint64
	for len(msgs) > 0 {
		k := min(len(msgs), tokenBatch)
		for i, msg := range msgs[:k] {
			keys[i] = m.messageKey(msg)
		}
		missed := false
		m.mu.Lock()
		for i := range k {
			n, ok := m.counts[keys[i]]
			if !ok {
				n, missed = -1, true
			}
			out[i] = n
		}
		m.mu.Unlock()
		if missed {
			for i, msg := range msgs[:k] {
				if out[i] < 0 {
					out[i] = m.keep(keys[i], func() int { return MessageTokens(m.tc, msg) })
				}
			}
		}
		msgs, out = msgs[k:], out[k:]
	}
}

// messageKey is the hash of all msg holds: its fields, each with its
// length, laid out in a buffer on the stack and hashed once (a text over
// 64 bytes as its own hash), under the seed of messages and tools (their
// buffers start 0 and 2), so that no message's key is a text's or a
// tool's.
func (m *TokenMemo) messageKey(msg *Message) uint64 {
	var buf [320]byte
	b := m.appendText(append(buf[:0], 0), string(msg.Role))
	b = m.appendText(b, msg.Content)
	b = m.appendText(b, msg.ToolCallID)
	for _, c := range msg.ToolCalls {
		b = append(b, 1)
		b = m.appendText(b, c.ID)
		b = m.appendText(b, c.Name)
		b = m.appendText(b, c.Arguments)
	}
	return maphash.Bytes(m.msgSeed, b)
}

// appendText appends s to b, its length first: a long text as its own
// hash, which maphash.String computes several times faster than a Hash
// fed in 128-byte blocks (a step's thread is hashed whole at every step).
func (m *TokenMemo) appendText(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	if len(s) <= 64 {
		return append(b, s...)
	}
	return binary.LittleEndian.AppendUint64(b, maphash.String(m.seed, s))
}

// keep returns the count kept under key, counting it with count first if
// there is none.
func (m *TokenMemo) keep(key uint64, count func() int) int {
	m.mu.Lock()
	n, ok := m.counts[key]
	m.mu.Unlock()
	if ok {
		return n
	}
	n = count()
	m.mu.Lock()
	if len(m.counts) >= m.max {
		m.counts = map[uint64]int{}
	}
	m.counts[key] = n
	m.mu.Unlock()
	return n
}

// MessageTokens is what m costs in a chat completion request: its
// content, its tool calls' names and arguments and the id it answers,
// plus the chat format's framing per message.
func MessageTokens(tc TokenCounter, m *Message) int {
	n := tokensPerMessage + tc.CountTokens(string(m.Role)) + tc.CountTokens(m.Content)
	if m.ToolCallID != "" {
		n += tc.CountTokens(m.ToolCallID)
	}
	for _, c := range m.ToolCalls {
		n += tokensPerMessage + tc.CountTokens(c.ID) + tc.CountTokens(c.Name) + tc.CountTokens(c.Arguments)
	}
	return n
}

// ToolTokens is what offering t costs: its name, description and
// parameter schema as text. Servers render tools into the prompt in a
// format of their own, so this is an estimate within a few percent, not
// the server's count.
func ToolTokens(tc TokenCounter, t *ToolSpec) int {
	return tokensPerMessage + tc.CountTokens(t.Name) + tc.CountTokens(t.Description) + tc.CountTokens(string(t.Parameters))
}

// RequestTokens is what req costs: every message, every tool, and the
// reply's priming.
func RequestTokens(tc TokenCounter, req *ModelRequest) int {
	n := tokensReplyPrime
	for i := range req.Messages {
		n += MessageTokens(tc, &req.Messages[i])
	}
	for i := range req.Tools {
		n += ToolTokens(tc, &req.Tools[i])
	}
	return n
}
