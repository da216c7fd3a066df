package stream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// headers are the response headers of a UI message stream: those of the
// AI SDK's createUIMessageStreamResponse, less "connection", which HTTP/2
// forbids and Go's server manages.
var headers = [...][2]string{
	{"Content-Type", "text/event-stream"},
	{"Cache-Control", "no-cache"},
	{"X-Vercel-Ai-Ui-Message-Stream", "v1"},
	{"X-Accel-Buffering", "no"},
}

// SetHeaders sets the headers of a UI message stream on h: content-type
// text/event-stream, cache-control no-cache, x-vercel-ai-ui-message-stream
// v1 and x-accel-buffering no (so that nginx passes each event on at once).
func SetHeaders(h http.Header) {
	for _, kv := range headers {
		h.Set(kv[0], kv[1])
	}
}

// Done is the data of the event that ends a stream, as the AI SDK's
// JsonToSseTransformStream sends it. Its event has no id, so a client's
// Last-Event-ID stays the Seq of the last chunk.
const Done = "[DONE]"

// Writer writes server-sent events to an HTTP response and flushes each,
// so that the client sees it at once. The caller sets the headers
// ([SetHeaders]) and the status first; [Serve] does all of that.
type Writer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// NewWriter returns a Writer on w. With timeout > 0, every write must
// complete within it (a client that stops reading is cut off rather than
// holding the handler forever); this needs a ResponseWriter that supports
// write deadlines, and is skipped where it does not.
func NewWriter(w http.ResponseWriter, timeout time.Duration) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// WriteEvent writes ev as "id: <seq>" and "data: <json>" lines and a
// blank line. Data holding line breaks (which encoded chunks never do) is
// split into several data lines, which the client joins back.
func (w *Writer) WriteEvent(ev Event) error {
	return w.write(func(b io.Writer) {
		io.WriteString(b, "id: ")
		io.WriteString(b, strconv.FormatInt(ev.Seq, 10))
		io.WriteString(b, "\n")
		writeData(b, ev.Data)
		io.WriteString(b, "\n")
	})
}

// writeUnnumbered writes data as an event without an id, so that the
// client's Last-Event-ID stays that of the last numbered event.
func (w *Writer) writeUnnumbered(data []byte) error {
	return w.write(func(b io.Writer) {
		writeData(b, data)
		io.WriteString(b, "\n")
	})
}

// WriteComment writes a comment line, which clients ignore; it keeps idle
// connections (and the proxies on their way) open.
func (w *Writer) WriteComment(text string) error {
	if strings.ContainsAny(text, "\r\n") {
		return errors.New("SSE comment with a line break")
	}
	return w.write(func(b io.Writer) {
		io.WriteString(b, ": ")
		io.WriteString(b, text)
		io.WriteString(b, "\n\n")
	})
}

// WriteDone writes the event that ends the stream ("data: [DONE]").
func (w *Writer) WriteDone() error {
	return w.write(func(b io.Writer) { io.WriteString(b, "data: "+Done+"\n\n") })
}

// write runs fill on the response under the write deadline, then flushes.
// Errors of the individual writes are those of the flush: the response
// buffers until then.
func (w *Writer) write(fill func(io.Writer)) error {
	if w.timeout > 0 {
		// ErrNotSupported (a wrapper without deadlines) leaves writes unbounded.
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	ew := &errWriter{w: w.w}
	fill(ew)
	if ew.err != nil {
		return fmt.Errorf("writing SSE event: %w", ew.err)
	}
	if err := w.rc.Flush(); err != nil {
		return fmt.Errorf("flushing SSE event: %w", err)
	}
	return nil
}

// clearDeadline lifts the write deadline, so that a kept-alive connection
// serves its next request unhindered.
func (w *Writer) clearDeadline() {
	if w.timeout > 0 {
		_ = w.rc.SetWriteDeadline(time.Time{})
	}
}

func writeData(b io.Writer, data []byte) {
	for {
		line, rest, more := cutLine(data)
		io.WriteString(b, "data: ")
		b.Write(line)
		io.WriteString(b, "\n")
		if !more {
			return
		}
		data = rest
	}
}

// cutLine cuts data at its first line break: "\r\n", "\n" or "\r", as
// the SSE grammar reads them.
func cutLine(data []byte) (line, rest []byte, found bool) {
	i := bytes.IndexAny(data, "\r\n")
	if i < 0 {
		return data, nil, false
	}
	if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
		return data[:i], data[i+2:], true
	}
	return data[:i], data[i+1:], true
}

// errWriter keeps the first error of a series of writes and skips the rest.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
