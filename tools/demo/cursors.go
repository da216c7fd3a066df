package demo

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// cursorCodec makes opaque, tamper-evident continuation tokens out of list
// positions: a 12-byte HMAC tag followed by the position masked with a
// second HMAC of the tag, base64url-encoded. Tokens look random, cannot be
// forged or guessed from a page number, and decode back to the position.
type cursorCodec struct{ key []byte }

func (c cursorCodec) mac(parts ...[]byte) []byte {
	m := hmac.New(sha256.New, c.key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func (c cursorCodec) encode(pos int) string {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(pos))
	tag := c.mac([]byte("pos"), p[:])[:12]
	mask := c.mac([]byte("mask"), tag)[:4]
	b := make([]byte, 0, 16)
	b = append(b, tag...)
	for i := range p {
		b = append(b, p[i]^mask[i])
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func (c cursorCodec) decode(s string) (int, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 16 {
		return 0, false
	}
	tag := b[:12]
	mask := c.mac([]byte("mask"), tag)[:4]
	var p [4]byte
	for i := range p {
		p[i] = b[12+i] ^ mask[i]
	}
	if !hmac.Equal(tag, c.mac([]byte("pos"), p[:])[:12]) {
		return 0, false
	}
	return int(binary.BigEndian.Uint32(p[:])), true
}

type ticketsPage struct {
	Tickets []ticket `json:"tickets"`
	// NextCursor is a string, or nil for the last page; the
	// MalformedContinuation fault puts an object here.
	NextCursor any `json:"next_cursor"`
}

func (s *Server) listTickets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := &s.opt.Faults
	limit, err := intParam(q, "limit", 0, 1)
	if err != nil {
		badRequest(w, err)
		return
	}
	status, err := enumParam(q, "status", "open", "pending", "solved", "closed")
	if err != nil {
		badRequest(w, err)
		return
	}
	priority, err := enumParam(q, "priority", "low", "normal", "high", "urgent")
	if err != nil {
		badRequest(w, err)
		return
	}
	pos := 0
	if cur := q.Get("cursor"); cur != "" {
		p, ok := s.ticks.decode(cur)
		if !ok {
			writeError(w, http.StatusBadRequest, "invalid_cursor", "The cursor is not one this API issued. Pass next_cursor from the previous page unchanged.")
			return
		}
		s.mu.Lock()
		s.walk.cursorPages++
		n := s.walk.cursorPages
		s.mu.Unlock()
		if f.ExpireCursorAfter > 0 && n > f.ExpireCursorAfter {
			writeError(w, http.StatusBadRequest, "cursor_expired", "The cursor has expired. Restart the listing from the first page.")
			return
		}
		pos = p
	} else {
		s.mu.Lock()
		s.walk.cursorPages = 0
		s.mu.Unlock()
		if f.FirstPageEmptyWithCursor {
			writeJSON(w, http.StatusOK, ticketsPage{Tickets: []ticket{}, NextCursor: s.ticks.encode(0)})
			return
		}
	}
	all := s.data.tickets
	if status != "" || priority != "" {
		all = filter(all, func(t *ticket) bool {
			return (status == "" || t.Status == status) && (priority == "" || t.Priority == priority)
		})
	}
	size := f.pageSize(limit, 50, 100)
	items := pageOf(f, all, pos, size)
	page := ticketsPage{Tickets: items}
	if end := pos + len(items); end < len(all) {
		next := s.ticks.encode(end)
		if f.CursorCycle && pos == 2*size {
			next = s.ticks.encode(size)
		}
		page.NextCursor = next
		if f.MalformedContinuation {
			page.NextCursor = map[string]any{"position": end, "token": next}
		}
	}
	writeJSON(w, http.StatusOK, page)
}

// listEvents answers a bare JSON array; the only continuation signal is
// the Link header (RFC 8288), in the order GitHub writes it.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, size, err := s.pageParams(q, 30, 100)
	if err != nil {
		badRequest(w, err)
		return
	}
	all := s.data.events
	if typ := q.Get("type"); typ != "" {
		all = filter(all, func(e *event) bool { return e.Type == typ || strings.HasPrefix(e.Type, typ+".") })
	}
	items := pageOf(&s.opt.Faults, all, (page-1)*size, size)
	last := max(1, (len(all)+size-1)/size)

	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	origin := scheme + "://" + r.Host
	link := func(origin string, n int, rel string) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("page", strconv.Itoa(n))
		return fmt.Sprintf(`<%s%s?%s>; rel="%s"`, origin, r.URL.Path, v.Encode(), rel)
	}
	var links []string
	if page > 1 {
		links = append(links, link(origin, min(page-1, last), "prev"))
	}
	if page < last {
		nextOrigin := origin
		if s.opt.Faults.ForeignNextURL {
			nextOrigin = ForeignOrigin
		}
		links = append(links, link(nextOrigin, page+1, "next"))
	}
	links = append(links, link(origin, last, "last"), link(origin, 1, "first"))
	w.Header().Set("Link", strings.Join(links, ", "))
	writeJSON(w, http.StatusOK, items)
}
