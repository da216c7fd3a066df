package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Reading upstream bodies. A body of announced length within the cap is
// read straight into a slice of that size. Any other is read into
// fixed-size chunks taken from a bounded free list, then assembled into
// one slice of its exact size (scrubbed on the way), and the chunks go
// back at once: no body
// leaves garbage from repeated growth, and the free list never holds more
// than maxFreeChunks × chunkSize bytes. While it is being read, a body
// holds a reservation on the deployment's in-flight cap: its
// Content-Length when the server sent one, else the whole per-body cap
// (so that no two readers can each hold part of the cap while waiting for
// the rest). A caller waits for room, bounded by its context.

const (
	chunkSize     = 256 << 10 // bytes per chunk
	maxFreeChunks = 32        // the free list's bound (8 MiB)
)

// ErrBodyBudget is returned (wrapped) when a call could not get room
// under the deployment's in-flight byte cap before its context ended.
var ErrBodyBudget = errors.New("in-flight upstream bytes at their cap")

// bodyReader reads bodies under a shared byte cap with pooled chunks.
// It is safe for concurrent use.
type bodyReader struct {
	max   int64 // per body; more is cut
	cap   int64 // all bodies being read at once
	inUse *semaphore.Weighted

	mu   sync.Mutex
	free [][]byte // chunks of chunkSize, at most maxFreeChunks
}

func newBodyReader(max, total int64) *bodyReader {
	if total <= max {
		total = max + 1 // room for at least one body of unknown length
	}
	return &bodyReader{max: max, cap: total, inUse: semaphore.NewWeighted(total)}
}

// read reads at most r.max bytes of body (reporting whether more
// followed), with length the declared Content-Length (-1 unknown), and
// returns them passed through scrub.
func (r *bodyReader) read(ctx context.Context, body io.Reader, length int64, scrub *Scrubber) (out []byte, truncated bool, err error) {
	reserve := r.max + 1
	if length >= 0 && length < reserve {
		reserve = length
	}
	if reserve > 0 {
		if err := r.inUse.Acquire(ctx, reserve); err != nil {
			return nil, false, fmt.Errorf("waiting for room to read the response (%w): %w", ErrBodyBudget, err)
		}
		defer r.inUse.Release(reserve)
	}
	if length >= 0 && length <= r.max {
		// The size is known: read straight into a slice of it.
		buf := make([]byte, length)
		k, err := io.ReadFull(body, buf)
		if err != nil {
			return nil, false, err
		}
		return scrub.Bytes(buf[:k]), false, nil
	}
	var chunks [][]byte
	defer func() { r.put(chunks) }()
	var n int64
	limit := reserve // the Content-Length, or one byte past the cap
	for n < limit {
		if len(chunks) == 0 || len(chunks[len(chunks)-1]) == cap(chunks[len(chunks)-1]) {
			chunks = append(chunks, r.get())
		}
		c := chunks[len(chunks)-1]
		room := c[len(c):cap(c)]
		if rem := limit - n; int64(len(room)) > rem {
			room = room[:rem]
		}
		k, rerr := body.Read(room)
		chunks[len(chunks)-1] = c[:len(c)+k]
		n += int64(k)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, false, rerr
		}
	}
	if n > r.max {
		truncated, n = true, r.max
	}
	// Assemble and scrub. A ScrubWriter writes into an exact-size
	// destination unless it masks something.
	dst := &exactBuffer{b: make([]byte, 0, n)}
	w := io.Writer(dst)
	var sw *ScrubWriter
	if !scrub.Empty() {
		sw = scrub.Writer(dst)
		w = sw
	}
	left := n
	for _, c := range chunks {
		if int64(len(c)) > left {
			c = c[:left]
		}
		if _, err := w.Write(c); err != nil {
			return nil, false, err
		}
		left -= int64(len(c))
	}
	if sw != nil {
		if err := sw.Close(); err != nil {
			return nil, false, err
		}
	}
	return dst.b, truncated, nil
}

func (r *bodyReader) get() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := len(r.free); k > 0 {
		c := r.free[k-1]
		r.free = r.free[:k-1]
		return c[:0]
	}
	return make([]byte, 0, chunkSize)
}

func (r *bodyReader) put(chunks [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range chunks {
		if len(r.free) >= maxFreeChunks {
			return // the rest is garbage: the free list stays bounded
		}
		r.free = append(r.free, c[:0])
	}
}

// exactBuffer is a writer into a pre-sized slice (it grows only when a
// mask makes the text longer than the original).
type exactBuffer struct{ b []byte }

func (e *exactBuffer) Write(p []byte) (int, error) {
	e.b = append(e.b, p...)
	return len(p), nil
}
