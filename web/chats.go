package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
)

// chatSummary is one thread in GET /v1/agents/{id}/chats.
type chatSummary struct {
	ChatID   string    `json:"chatId"`
	Title    string    `json:"title"` // the first user message, shortened
	Messages int       `json:"messages"`
	Updated  time.Time `json:"updated,omitzero"`
	Active   bool      `json:"active"` // a turn is running: resume its stream
}

// listChats lists the caller's threads with an agent, newest first, with
// the chats whose first turn is still running (not saved yet) on top.
func (s *Server) listChats(c echo.Context) error {
	p := principalOf(c)
	agentID := c.Param("id")
	if _, ok := s.agents.Get(agentID); !ok {
		return notFound("no agent " + strconv.Quote(agentID))
	}
	lister, ok := s.threads.(agent.ThreadLister)
	if !ok {
		return apiErr(http.StatusNotImplemented, "not_implemented", "this thread store cannot list threads")
	}
	threads, err := lister.ListThreads(c.Request().Context(), p.UserID, agentID, 100)
	if err != nil {
		return internal(err)
	}
	prefix := agent.ThreadKey(p.UserID, agentID, "")
	active, err := s.runs.ActiveKeys(c.Request().Context(), prefix)
	if err != nil {
		return internal(err)
	}
	running := map[string]bool{}
	for _, k := range active {
		running[k] = true
	}
	out := []chatSummary{}
	seen := map[string]bool{}
	for _, key := range active {
		if !slicesContainsKey(threads, key) {
			out = append(out, chatSummary{ChatID: chatIDOf(key, prefix), Title: "(first turn running)", Active: true})
		}
	}
	for _, t := range threads {
		if seen[t.Key] {
			continue
		}
		seen[t.Key] = true
		sum := chatSummary{ChatID: t.ChatID, Messages: len(t.Msgs), Updated: t.Updated, Active: running[t.Key]}
		for _, m := range t.Msgs {
			if m.Role == agent.RoleUser {
				sum.Title = shorten(m.Text(), 80)
				break
			}
		}
		out = append(out, sum)
	}
	return c.JSON(http.StatusOK, map[string]any{"chats": out})
}

func slicesContainsKey(ts []*agent.Thread, key string) bool {
	for _, t := range ts {
		if t.Key == key {
			return true
		}
	}
	return false
}

// chatIDOf recovers the chat id from a thread key (ThreadKey escapes it).
func chatIDOf(key, prefix string) string {
	id := strings.TrimPrefix(key, prefix)
	if u, err := url.PathUnescape(id); err == nil {
		return u
	}
	return id
}

// shorten cuts s to n runes on a word boundary where it can.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n]
	if i := strings.LastIndexByte(string(r), ' '); i > n/2 {
		return string(r)[:i] + "…"
	}
	return string(r) + "…"
}
