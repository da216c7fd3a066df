package tools

import (
	"context"
	"sync"
)

// Media is a picture or a sound an MCP tool returned. The result's JSON
// names it ({"type": "image", "mimeType", "bytes", "attached": true})
// without its data; the data travels beside it, for a model that can
// look at it and for the MCP clients of trawl's own server.
type Media struct {
	Type     string `json:"type"` // "image" or "audio"
	MIMEType string `json:"mimeType"`
	Data     []byte `json:"data"` // raw bytes (base64 in JSON)
}

// MaxMediaBytes bounds the media one call keeps (together): a larger
// picture is summarised in the result, as before, and not attached.
const MaxMediaBytes = 4 << 20

// MediaSink collects the media of one engine call's requests. It is safe
// for concurrent use.
type MediaSink struct {
	mu    sync.Mutex
	items []Media
	size  int
}

type mediaSinkKey struct{}

// WithMediaSink returns ctx carrying a new sink: the MCP tools called
// under it attach their pictures and sounds to it rather than drop them.
func WithMediaSink(ctx context.Context) (context.Context, *MediaSink) {
	s := &MediaSink{}
	return context.WithValue(ctx, mediaSinkKey{}, s), s
}

func mediaSinkOf(ctx context.Context) *MediaSink {
	s, _ := ctx.Value(mediaSinkKey{}).(*MediaSink)
	return s
}

// Media returns what was attached, in order.
func (s *MediaSink) Media() []Media {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Media(nil), s.items...)
}

// take attaches m when it fits what the sink still has room for.
func (s *MediaSink) take(m Media) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(m.Data) == 0 || s.size+len(m.Data) > MaxMediaBytes {
		return false
	}
	s.items = append(s.items, m)
	s.size += len(m.Data)
	return true
}
