package demo

import (
	"fmt"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"
)

// The chat backend is a WhatsApp-style business inbox: conversations with
// customers and groups, each with its message history.

type chatConversation struct {
	ID            string   `json:"id"`
	Type          string   `json:"type"`
	Name          string   `json:"name"`
	Participants  []string `json:"participants"`
	LastMessageAt string   `json:"last_message_at"`
	UnreadCount   int      `json:"unread_count"`
}

type chatMessage struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	From           string `json:"from"`
	Direction      string `json:"direction"`
	Text           string `json:"text"`
	Timestamp      string `json:"timestamp"`
	Status         string `json:"status"`
}

type chatState struct {
	now   func() time.Time
	codec cursorCodec
	seq   int
	convs []*chatConversation      // most recent activity first
	msgs  map[string][]chatMessage // by conversation, newest first
}

const chatBusinessNumber = "+351 210 000 100"

var chatLines = []string{
	"Hi! Is my order shipping today?", "Can I change the delivery address?", "Thanks, that worked 🙏",
	"Do you have the rocket skates in size 44?", "The tracking link says 'label created' since Monday.",
	"Could you send me the invoice as PDF?", "Perfect, see you at 3pm.", "Is the warehouse open on Saturday?",
	"We need 20 more anvils for the event next week.", "Just paid the balance, please confirm.",
	"Our driver is outside, gate B.", "Can we move the call to tomorrow?", "👍", "Received, thank you!",
	"What's the lead time for the portable hole?", "The discount code isn't working at checkout.",
}

var chatReplies = []string{
	"Hi! Yes, it leaves our warehouse this afternoon.", "Sure, send me the new address and I'll update it.",
	"Happy to help!", "Let me check the stock and get back to you.", "I've emailed the invoice to you just now.",
	"Confirmed, payment received. Thank you!", "Our Saturday hours are 9:00–13:00.", "I've reopened your ticket and escalated it.",
}

func newChatState(now func() time.Time) *chatState {
	p := newPRNG(0xC4A7)
	st := &chatState{now: now, codec: cursorCodec{key: []byte("chat-page-v1")}, msgs: map[string][]chatMessage{}}
	for i := 0; i < 28; i++ {
		c := &chatConversation{ID: fmt.Sprintf("conv_%02d", i+1), Type: "direct"}
		fn, ln := pick(p, firstNames), pick(p, lastNames)
		c.Name = fn + " " + ln
		c.Participants = []string{fmt.Sprintf("+%d %03d %03d %03d", 30+p.intn(60), p.intn(1000), p.intn(1000), p.intn(1000))}
		if i%7 == 3 {
			c.Type, c.Name = "group", pick(p, companies)+" × Acme"
			for k := 0; k < 3; k++ {
				c.Participants = append(c.Participants, fmt.Sprintf("+%d %03d %03d %03d", 30+p.intn(60), p.intn(1000), p.intn(1000), p.intn(1000)))
			}
		}
		n := p.between(3, 60)
		if i%5 == 1 {
			n = p.between(101, 180)
		}
		at := dataEnd.Add(-time.Duration(p.between(24*30, 24*60)) * time.Hour)
		msgs := make([]chatMessage, n)
		for j := 0; j < n; j++ {
			at = at.Add(time.Duration(p.between(2, 600)) * time.Minute)
			m := chatMessage{ConversationID: c.ID, Timestamp: iso(at), Status: "read"}
			if p.chance(55) {
				m.From, m.Direction, m.Text = pick(p, c.Participants), "inbound", pick(p, chatLines)
			} else {
				m.From, m.Direction, m.Text = chatBusinessNumber, "outbound", pick(p, chatReplies)
			}
			st.seq++
			m.ID = fmt.Sprintf("wamid.HBgM%010d%06X", 351910000000+i, st.seq)
			msgs[n-1-j] = m
		}
		if msgs[0].Direction == "inbound" && p.chance(60) {
			c.UnreadCount = p.between(1, 4)
			for k := 0; k < c.UnreadCount && k < n; k++ {
				msgs[k].Status = "delivered"
			}
		}
		c.LastMessageAt = msgs[0].Timestamp
		st.msgs[c.ID] = msgs
		st.convs = append(st.convs, c)
	}
	st.sortConvs()
	return st
}

func (st *chatState) sortConvs() {
	slices.SortStableFunc(st.convs, func(a, b *chatConversation) int {
		if a.LastMessageAt != b.LastMessageAt {
			if a.LastMessageAt > b.LastMessageAt {
				return -1
			}
			return 1
		}
		return 0
	})
}

func (s *Server) routeChat() {
	handle(s.mux, "GET /chat/conversations", s.chat, plainStyle, (*chatState).listConversations)
	handle(s.mux, "GET /chat/conversations/{conversation_id}/messages", s.chat, plainStyle, (*chatState).listMessages)
	handle(s.mux, "POST /chat/conversations/{conversation_id}/messages", s.chat, plainStyle, (*chatState).send)
}

type responseMetadata struct {
	NextCursor string `json:"next_cursor"`
}

func (st *chatState) listConversations(a args, _ *http.Request) (any, error) {
	all := st.convs
	if typ := a.str("type"); typ != "" {
		if typ != "direct" && typ != "group" {
			return nil, errf(http.StatusBadRequest, "Invalid type %q: use direct or group.", typ)
		}
		all = slices.DeleteFunc(slices.Clone(all), func(c *chatConversation) bool { return c.Type != typ })
	}
	if only, _, err := a.boolean("unread_only"); err != nil {
		return nil, err
	} else if only {
		all = slices.DeleteFunc(slices.Clone(all), func(c *chatConversation) bool { return c.UnreadCount == 0 })
	}
	page, next, err := paginate(st.codec, a, "limit", "cursor", 20, 100, all)
	if err != nil {
		return nil, err
	}
	return struct {
		Conversations    []*chatConversation `json:"conversations"`
		ResponseMetadata responseMetadata    `json:"response_metadata"`
	}{page, responseMetadata{next}}, nil
}

func (st *chatState) conversation(id string) (*chatConversation, error) {
	for _, c := range st.convs {
		if c.ID == id {
			return c, nil
		}
	}
	return nil, errf(http.StatusNotFound, "Conversation %q not found. List conversations to find its id.", id)
}

func (st *chatState) listMessages(a args, r *http.Request) (any, error) {
	c, err := st.conversation(r.PathValue("conversation_id"))
	if err != nil {
		return nil, err
	}
	page, next, err := paginate(st.codec, a, "limit", "cursor", 50, 100, st.msgs[c.ID])
	if err != nil {
		return nil, err
	}
	return struct {
		Messages         []chatMessage    `json:"messages"`
		HasMore          bool             `json:"has_more"`
		ResponseMetadata responseMetadata `json:"response_metadata"`
	}{page, next != "", responseMetadata{next}}, nil
}

func (st *chatState) send(a args, r *http.Request) (any, error) {
	c, err := st.conversation(r.PathValue("conversation_id"))
	if err != nil {
		return nil, err
	}
	text, err := a.required("text")
	if err != nil {
		return nil, err
	}
	if utf8.RuneCountInString(text) > 4096 {
		return nil, errf(http.StatusBadRequest, "Message text is limited to 4096 characters.")
	}
	st.seq++
	m := chatMessage{ID: fmt.Sprintf("wamid.HBgM%010d%06X", 351999999999, st.seq), ConversationID: c.ID,
		From: chatBusinessNumber, Direction: "outbound", Text: text, Timestamp: iso(st.now()), Status: "sent"}
	st.msgs[c.ID] = slices.Insert(st.msgs[c.ID], 0, m)
	c.LastMessageAt, c.UnreadCount = m.Timestamp, 0
	st.sortConvs()
	return map[string]any{"ok": true, "message": m}, nil
}
