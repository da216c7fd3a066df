package tools

import (
	"bytes"
	"io"
	"unicode/utf8"
)

// Writer returns a writer that scrubs what it is given on its way to w.
// It holds back only what may still turn out to be part of a secret (a
// prefix of one of its forms, at most the longest form — six bytes a
// character when every character is escaped — and the base64 character
// before it, if it is one) until more arrives or Close flushes it. A secret split across Write calls is
// masked like one written whole.
func (s *Scrubber) Writer(w io.Writer) *ScrubWriter {
	sw := &ScrubWriter{s: s, w: w}
	if !s.Empty() {
		sw.st = s.newScan()
	}
	return sw
}

// ScrubWriter is Scrubber.Writer's writer. It is not safe for concurrent
// use.
type ScrubWriter struct {
	s       *Scrubber
	w       io.Writer
	st      *scanState
	tail    []byte // held back: absolute positions [tailPos, tailPos+len(tail))
	tailPos int64
	spans   []span // matches not yet written, by start
	err     error
}

// Write scrubs p and writes what can no longer be part of a secret.
func (sw *ScrubWriter) Write(p []byte) (int, error) {
	if sw.err != nil {
		return 0, sw.err
	}
	if sw.s.Empty() {
		_, sw.err = sw.w.Write(p)
		if sw.err != nil {
			return 0, sw.err
		}
		return len(p), nil
	}
	base := sw.tailPos + int64(len(sw.tail))
	sw.s.scan(p, base, sw.tail, sw.st, &sw.spans)
	end := base + int64(len(p))
	// Bytes before frontier can start no future match; a pending span
	// reaching it may still grow.
	frontier := sw.st.frontier(sw.s, end)
	if n := len(sw.spans); n > 0 && sw.spans[n-1].end >= frontier {
		frontier = min(frontier, sw.spans[n-1].start)
	}
	if frontier <= sw.tailPos {
		sw.tail = append(sw.tail, p...)
		return len(p), nil
	}
	if err := sw.emit(p, base, frontier); err != nil {
		return 0, err
	}
	return len(p), nil
}

// emit writes the virtual buffer tail+p (p starting at base) up to
// upTo, masking spans, and keeps the rest as the new tail.
func (sw *ScrubWriter) emit(p []byte, base, upTo int64) error {
	at := func(from, to int64) []byte { // bytes [from, to) of tail+p, to ≤ base or from ≥ base
		if to <= base {
			return sw.tail[from-sw.tailPos : to-sw.tailPos]
		}
		return p[from-base : to-base]
	}
	write := func(from, to int64) {
		for from < to && sw.err == nil {
			stop := to
			if from < base && to > base {
				stop = base
			}
			_, sw.err = sw.w.Write(at(from, stop))
			from = stop
		}
	}
	pos := sw.tailPos
	k := 0
	for ; k < len(sw.spans) && sw.spans[k].end <= upTo; k++ {
		sp := sw.spans[k]
		write(pos, sp.start)
		if sw.err == nil {
			_, sw.err = io.WriteString(sw.w, Mask)
		}
		pos = sp.end
	}
	if k < len(sw.spans) && sw.spans[k].start < upTo {
		upTo = sw.spans[k].start
	}
	if pos < upTo {
		write(pos, upTo)
		pos = upTo
	}
	sw.spans = append(sw.spans[:0], sw.spans[k:]...)
	// The new tail: [pos, base+len(p)).
	if pos < base {
		n := copy(sw.tail, sw.tail[pos-sw.tailPos:])
		sw.tail = append(sw.tail[:n], p...)
	} else {
		sw.tail = append(sw.tail[:0], p[pos-base:]...)
	}
	sw.tailPos = pos
	sw.st.floor = pos // what is written is never masked after the fact
	return sw.err
}

// Close writes what was held back. It does not close the underlying
// writer.
func (sw *ScrubWriter) Close() error {
	if sw.err != nil || sw.st == nil {
		return sw.err
	}
	sw.st.finish(sw.s, &sw.spans)
	if len(sw.tail) == 0 && len(sw.spans) == 0 {
		return nil
	}
	end := sw.tailPos + int64(len(sw.tail))
	return sw.emit(nil, end, end)
}

// Held is how many bytes the writer holds back.
func (sw *ScrubWriter) Held() int { return len(sw.tail) }

// Text returns a scrubber for text that arrives in pieces, such as a
// model's streamed deltas: each piece goes in, and what can no longer be
// part of a secret comes out, cut only between characters. A secret split
// across pieces is masked like one sent whole.
func (s *Scrubber) Text() *TextScrubber {
	t := &TextScrubber{}
	t.w = s.Writer(&t.out)
	return t
}

// TextScrubber is Scrubber.Text's scrubber. It is not safe for
// concurrent use.
type TextScrubber struct {
	w   *ScrubWriter
	out bytes.Buffer
}

// Next takes the next piece and returns the text that is ready (maybe "").
func (t *TextScrubber) Next(piece string) string {
	_, _ = t.w.Write([]byte(piece)) // into a bytes.Buffer: no error
	b := t.out.Bytes()
	n := len(b)
	// Keep an incomplete character for the next piece.
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				n = i
			}
			break
		}
	}
	out := string(b[:n])
	t.out.Next(n)
	return out
}

// Flush returns everything held back; the scrubber is then done.
func (t *TextScrubber) Flush() string {
	_ = t.w.Close()
	out := t.out.String()
	t.out.Reset()
	return out
}
