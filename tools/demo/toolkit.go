package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// A toolkit backend (mail, chat, crm, calendar) keeps its state in a store:
// one value behind one lock, built from the generator on first use (so a
// test that only touches the Acme API never pays for the mailbox) and
// rebuilt after reset. Handlers run with the lock held, so a handler sees
// and leaves a consistent state.
type store[T any] struct {
	init func() *T

	mu sync.Mutex
	st *T // nil until first use
}

func newStore[T any](init func() *T) *store[T] { return &store[T]{init: init} }

func (s *store[T]) reset() {
	s.mu.Lock()
	s.st = nil
	s.mu.Unlock()
}

// lock locks the store and returns its state, building it if needed.
func (s *store[T]) lock() *T {
	s.mu.Lock()
	if s.st == nil {
		s.st = s.init()
	}
	return s.st
}

// httpErr is an error a toolkit handler answers with.
type httpErr struct {
	status int
	msg    string
}

func (e *httpErr) Error() string { return e.msg }

func errf(status int, format string, a ...any) error {
	return &httpErr{status: status, msg: fmt.Sprintf(format, a...)}
}

// errStyle writes an error in the vendor's own error shape.
type errStyle func(w http.ResponseWriter, status int, msg string)

// googleStyle is the error shape of Google's APIs (mail, calendar).
func googleStyle(w http.ResponseWriter, status int, msg string) {
	type body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	st := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
		404: "NOT_FOUND", 409: "ALREADY_EXISTS", 500: "INTERNAL"}[status]
	writeJSON(w, status, map[string]body{"error": {Code: status, Message: msg, Status: st}})
}

// plainStyle is the Acme error shape (chat, crm).
func plainStyle(w http.ResponseWriter, status int, msg string) {
	code := map[int]string{400: "invalid_request", 404: "not_found", 409: "conflict", 500: "server_error"}[status]
	writeError(w, status, code, msg)
}

// handle registers a toolkit handler: arguments are read from the query and
// the JSON body, the store is locked around the call, a nil result answers
// 204 No Content.
func handle[T any](mux *http.ServeMux, pattern string, s *store[T], style errStyle, h func(st *T, a args, r *http.Request) (any, error)) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		a, err := readArgs(r)
		if err != nil {
			style(w, http.StatusBadRequest, err.Error())
			return
		}
		st := s.lock()
		defer s.mu.Unlock()
		v, err := h(st, a, r)
		var he *httpErr
		switch {
		case errors.As(err, &he):
			style(w, he.status, he.msg)
		case err != nil:
			style(w, http.StatusInternalServerError, "Internal error.")
		case v == nil:
			w.WriteHeader(http.StatusNoContent)
		default:
			writeJSON(w, http.StatusOK, v)
		}
	})
}

// args are one toolkit call's arguments: the query string merged with a
// JSON object body (the body wins), so the backends accept whichever way an
// invoker sends them.
type args struct {
	q    url.Values
	body map[string]any
}

func readArgs(r *http.Request) (args, error) {
	a := args{q: r.URL.Query()}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return a, errors.New("the request body could not be read")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return a, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&a.body); err != nil {
		return a, errors.New("the request body must be a JSON object")
	}
	return a, nil
}

func (a args) raw(name string) (any, bool) {
	if v, ok := a.body[name]; ok && v != nil {
		return v, true
	}
	if vs, ok := a.q[name]; ok && len(vs) > 0 {
		if len(vs) == 1 {
			return vs[0], true
		}
		out := make([]any, len(vs))
		for i, v := range vs {
			out[i] = v
		}
		return out, true
	}
	return nil, false
}

func (a args) has(name string) bool { _, ok := a.raw(name); return ok }

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func (a args) str(name string) string {
	v, _ := a.raw(name)
	if xs, ok := v.([]any); ok && len(xs) > 0 {
		return scalar(xs[0])
	}
	return scalar(v)
}

// strs reads a list: a JSON array, repeated query keys, or a
// comma-separated string.
func (a args) strs(name string) []string {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	var parts []string
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			parts = append(parts, strings.Split(scalar(e), ",")...)
		}
	default:
		parts = strings.Split(scalar(x), ",")
	}
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (a args) required(name string) (string, error) {
	if v := strings.TrimSpace(a.str(name)); v != "" {
		return v, nil
	}
	return "", errf(http.StatusBadRequest, "Missing required argument %q.", name)
}

func (a args) integer(name string, def int) (int, error) {
	if !a.has(name) {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(a.str(name)))
	if err != nil {
		return 0, errf(http.StatusBadRequest, "Invalid value for %q: %q is not an integer.", name, a.str(name))
	}
	return n, nil
}

// boolean reads a flag; set reports whether it was given at all.
func (a args) boolean(name string) (v, set bool, err error) {
	if !a.has(name) {
		return false, false, nil
	}
	b, err := strconv.ParseBool(a.str(name))
	if err != nil {
		return false, true, errf(http.StatusBadRequest, "Invalid value for %q: expected true or false.", name)
	}
	return b, true, nil
}

func (a args) object(name string) map[string]any {
	if m, ok := a.body[name].(map[string]any); ok {
		return m
	}
	if s := a.q.Get(name); s != "" {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil {
			return m
		}
	}
	return nil
}

// paginate slices all by a page size argument and an opaque page token
// made by codec. The token is empty on the last page.
func paginate[T any](codec cursorCodec, a args, sizeArg, tokenArg string, def, maxSize int, all []T) ([]T, string, error) {
	size, err := a.integer(sizeArg, def)
	if err != nil {
		return nil, "", err
	}
	if size < 1 {
		return nil, "", errf(http.StatusBadRequest, "Invalid value for %q: must be at least 1.", sizeArg)
	}
	size = min(size, maxSize)
	start := 0
	if tok := a.str(tokenArg); tok != "" {
		p, ok := codec.decode(tok)
		if !ok {
			return nil, "", errf(http.StatusBadRequest, "Invalid %s: pass the token from the previous page unchanged.", tokenArg)
		}
		start = min(p, len(all))
	}
	end := min(start+size, len(all))
	next := ""
	if end < len(all) {
		next = codec.encode(end)
	}
	page := append(make([]T, 0, end-start), all[start:end]...)
	return page, next, nil
}
