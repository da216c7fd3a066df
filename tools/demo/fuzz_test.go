package demo

import (
	"net/url"
	"testing"
	"time"
)

func FuzzCursorDecode(f *testing.F) {
	c := cursorCodec{key: []byte("acme-tickets-v1")}
	for _, pos := range []int{0, 50, 899, 1 << 20} {
		f.Add(c.encode(pos))
	}
	f.Add("")
	f.Add("NTA")
	f.Add("AAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		pos, ok := c.decode(s)
		if !ok {
			return
		}
		// Only the codec's own tokens decode, and each has one spelling.
		if again := c.encode(pos); again != s {
			t.Fatalf("%q decodes to %d, which encodes to %q", s, pos, again)
		}
	})
}

func FuzzMailQuery(f *testing.F) {
	st := newMailState(func() time.Time { return dataEnd })
	for _, q := range []string{`from:anna is:unread`, `subject:"Q3 roadmap" -label:Receipts`, `after:2025/06/01 before:2025-06-30`,
		`newer_than:7d has:attachment`, `in:anywhere OR "`, `-`, `::`, `label:`} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		msgs, err := st.search(args{q: url.Values{"q": {q}}})
		if err == nil && msgs == nil {
			t.Fatalf("%q: nil result without error", q)
		}
	})
}
