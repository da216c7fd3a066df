package demo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The mail backend is a Gmail-like mailbox for one user. Its state is
// generated from a fixed seed, lives per Server, and mutations change it.

const mailUser = "jordan.lee@acme.example"

type mailAttachment struct {
	AttachmentID string `json:"attachmentId"`
	Filename     string `json:"filename"`
	MimeType     string `json:"mimeType"`
	Size         int    `json:"size"`
	data         []byte
}

type mailMessage struct {
	ID           string           `json:"id"`
	ThreadID     string           `json:"threadId"`
	LabelIDs     []string         `json:"labelIds"`
	Snippet      string           `json:"snippet"`
	HistoryID    string           `json:"historyId"`
	InternalDate string           `json:"internalDate"`
	SizeEstimate int              `json:"sizeEstimate"`
	From         string           `json:"from"`
	To           []string         `json:"to"`
	Cc           []string         `json:"cc,omitempty"`
	Bcc          []string         `json:"bcc,omitempty"`
	Subject      string           `json:"subject"`
	Date         string           `json:"date"`
	Body         string           `json:"body,omitempty"`
	Attachments  []mailAttachment `json:"attachments"`
	date         time.Time
}

func (m *mailMessage) has(label string) bool { return slices.Contains(m.LabelIDs, label) }

func (m *mailMessage) addLabel(id string) bool {
	if m.has(id) {
		return false
	}
	m.LabelIDs = append(m.LabelIDs, id)
	return true
}

func (m *mailMessage) removeLabel(id string) bool {
	i := slices.Index(m.LabelIDs, id)
	if i < 0 {
		return false
	}
	m.LabelIDs = slices.Delete(m.LabelIDs, i, i+1)
	return true
}

type labelColor struct {
	TextColor       string `json:"textColor"`
	BackgroundColor string `json:"backgroundColor"`
}

type mailLabel struct {
	ID                    string      `json:"id"`
	Name                  string      `json:"name"`
	Type                  string      `json:"type"`
	MessageListVisibility string      `json:"messageListVisibility,omitempty"`
	LabelListVisibility   string      `json:"labelListVisibility,omitempty"`
	Color                 *labelColor `json:"color,omitempty"`
}

type mailFilter struct {
	ID       string         `json:"id"`
	Criteria map[string]any `json:"criteria"`
	Action   map[string]any `json:"action"`
}

type sendAs struct {
	SendAsEmail        string `json:"sendAsEmail"`
	DisplayName        string `json:"displayName"`
	ReplyToAddress     string `json:"replyToAddress,omitempty"`
	Signature          string `json:"signature"`
	IsPrimary          bool   `json:"isPrimary"`
	IsDefault          bool   `json:"isDefault"`
	TreatAsAlias       bool   `json:"treatAsAlias"`
	VerificationStatus string `json:"verificationStatus"`
}

type historyRecord struct {
	ID              string           `json:"id"`
	Messages        []msgRef         `json:"messages"`
	MessagesAdded   []historyMessage `json:"messagesAdded,omitempty"`
	MessagesDeleted []historyMessage `json:"messagesDeleted,omitempty"`
	LabelsAdded     []historyLabels  `json:"labelsAdded,omitempty"`
	LabelsRemoved   []historyLabels  `json:"labelsRemoved,omitempty"`
}

type msgRef struct {
	ID       string   `json:"id"`
	ThreadID string   `json:"threadId"`
	LabelIDs []string `json:"labelIds,omitempty"`
}

type historyMessage struct {
	Message msgRef `json:"message"`
}

type historyLabels struct {
	Message  msgRef   `json:"message"`
	LabelIDs []string `json:"labelIds"`
}

type mailContact struct {
	Name          string `json:"name"`
	EmailAddress  string `json:"emailAddress"`
	Company       string `json:"company"`
	LastContacted string `json:"lastContacted"`
}

type mailState struct {
	now   func() time.Time
	codec cursorCodec
	seq   uint64 // numbers new ids

	msgs      []*mailMessage // newest first
	byID      map[string]*mailMessage
	labels    []*mailLabel      // system labels first
	drafts    map[string]string // draft id -> message id
	draftIDs  []string          // newest first
	filters   []*mailFilter
	vacation  map[string]any
	autoFwd   map[string]any
	fwdAddrs  []map[string]string
	imap      map[string]any
	pop       map[string]any
	language  string
	sendAs    []*sendAs
	delegates []map[string]string
	history   []historyRecord
	historyID int
	contacts  []mailContact
}

var systemLabels = []string{"INBOX", "SENT", "DRAFT", "SPAM", "TRASH", "STARRED", "UNREAD", "IMPORTANT",
	"CATEGORY_PERSONAL", "CATEGORY_SOCIAL", "CATEGORY_PROMOTIONS", "CATEGORY_UPDATES", "CATEGORY_FORUMS"}

type mailTopic struct {
	subject  string
	labels   []string
	attach   string // "name|mime" or ""
	external bool   // sent by a stranger (newsletter, alert, spam)
	body     string
	replies  []string
}

var mailTopics = []mailTopic{
	{"Invoice {inv} from {company}", []string{"Label_1", "CATEGORY_UPDATES"}, "{inv}.pdf|application/pdf", false,
		"Hi Jordan,\n\nPlease find attached invoice {inv} for {amount}, due on {due}. Payment can be made by bank transfer to the account on the invoice.\n\nThanks,\n{from}", nil},
	{"Your order {ord} has shipped", []string{"Label_1", "CATEGORY_UPDATES"}, "", true,
		"Good news! Your order {ord} is on its way and should arrive within 3-5 business days. Track it from your account page.", nil},
	{"Q3 roadmap review", []string{"IMPORTANT"}, "roadmap-q3.csv|text/csv", false,
		"Hi all,\n\nAhead of Thursday's review I've attached the draft roadmap. The big open question is whether the rocket skates recall work moves to Q4.\n\n{from}",
		[]string{"Thanks {first}, I'd keep the recall work in Q3; support tickets are still climbing.", "Agreed. Can we also get a sizing for the portable hole v2?"}},
	{"Contract renewal — {company}", []string{"Label_3", "IMPORTANT"}, "renewal-terms.pdf|application/pdf", false,
		"Hi Jordan,\n\nOur contract is up for renewal on {due}. Attached are the proposed terms: a 12-month term at {amount} with the same SLA. Let me know if you'd like to set up a call.\n\nBest,\n{from}",
		[]string{"Thanks, I'll review with finance and get back to you this week.", "Following up on this — any update on the renewal?"}},
	{"Flight confirmation: {city} to {city2}", []string{"Label_2", "CATEGORY_UPDATES"}, "itinerary.pdf|application/pdf", true,
		"Your booking is confirmed. Flight AC{num} departs {city} on {due} at 08:45 and arrives in {city2} at 11:20. Check-in opens 24 hours before departure.", nil},
	{"Booking confirmed at {property}", []string{"Label_2"}, "", true,
		"Thank you for booking {property}. Check-in is from 15:00 on {due}. Reply to this email if you need an early check-in.", nil},
	{"Weekly metrics digest", []string{"Label_5", "CATEGORY_UPDATES"}, "metrics.csv|text/csv", true,
		"This week: {num} new orders, revenue {amount}, 42 open tickets (-8%). Full breakdown attached.", nil},
	{"Lunch next week?", []string{"CATEGORY_PERSONAL"}, "", false,
		"Hey Jordan, are you free for lunch next Tuesday or Wednesday? There's a new place near the office I've been wanting to try.\n\n{first}",
		[]string{"Wednesday works! 12:30?", "Perfect, see you then."}},
	{"Support escalation: {tkt}", []string{"Label_4", "IMPORTANT"}, "", false,
		"Hi Jordan,\n\nEscalating {tkt}: the customer has been waiting 6 days for a refund and is threatening a chargeback. Can you approve the refund today?\n\n{from}",
		[]string{"Approved. Please process it and let the customer know.", "Done, refund issued and customer informed."}},
	{"The {company} newsletter — June edition", []string{"Label_5", "CATEGORY_PROMOTIONS"}, "", true,
		"In this issue: how we cut delivery times by 30%, our new partnership program, and an interview with our head of logistics.", nil},
	{"Security alert: new sign-in from {city}", []string{"CATEGORY_UPDATES"}, "", true,
		"We noticed a new sign-in to your account from {city}. If this was you, you don't need to do anything. If not, reset your password now.", nil},
	{"Meeting notes: pricing workshop", nil, "pricing-notes.txt|text/plain", false,
		"Notes from today's pricing workshop are attached. Action items: update the anvil bundle pricing, draft the enterprise tier FAQ, and review discount approvals.", nil},
	{"Invitation: Design review @ {due} 14:00", []string{"IMPORTANT"}, "invite.ics|text/calendar", false,
		"You have been invited to Design review. When: {due} 14:00-15:00. Where: Room 4B / video call. Please RSVP.", nil},
	{"50% off rocket skates this weekend only", []string{"CATEGORY_PROMOTIONS"}, "", true,
		"Don't miss our biggest sale of the season: 50% off rocket skates, jet-propelled unicycles and more. Offer ends Sunday at midnight.", nil},
	{"You were mentioned in #launch-planning", []string{"CATEGORY_SOCIAL"}, "", true,
		"{first} mentioned you: \"@jordan can you confirm the launch date with the warehouse?\" Reply in the app to join the conversation.", nil},
	{"Claim your prize now!!!", []string{"SPAM"}, "", true,
		"Congratulations! You have been selected to receive a $1000 gift card. Click here to claim before it expires.", nil},
}

func hexID(t time.Time, n uint64) string {
	return fmt.Sprintf("%016x", uint64(t.UnixMilli())<<20|n&0xfffff)
}

// newMailState generates the mailbox: 200 threads, about 320 messages.
func newMailState(now func() time.Time) *mailState {
	p := newPRNG(0x3A11)
	st := &mailState{now: now, codec: cursorCodec{key: []byte("mail-page-v1")}, byID: map[string]*mailMessage{},
		drafts: map[string]string{}, language: "en"}
	for _, id := range systemLabels {
		st.labels = append(st.labels, &mailLabel{ID: id, Name: id, Type: "system"})
	}
	for i, name := range []string{"Receipts", "Travel", "Clients", "Follow up", "Newsletters", "Clients/Initech"} {
		st.labels = append(st.labels, &mailLabel{ID: fmt.Sprintf("Label_%d", i+1), Name: name, Type: "user",
			MessageListVisibility: "show", LabelListVisibility: "labelShow",
			Color: &labelColor{TextColor: "#ffffff", BackgroundColor: pick(p, []string{"#16a765", "#4986e7", "#fb4c2f", "#ffad47", "#8e63ce"})}})
	}
	type person struct{ first, name, email, company string }
	people := make([]person, 40)
	for i := range people {
		fn, ln, co := pick(p, firstNames), pick(p, lastNames), pick(p, companies)
		people[i] = person{fn, fn + " " + ln, emailLocal(fn, ln) + "@" + domainOf(co), co}
	}
	lastSeen := map[string]time.Time{}
	start := dataEnd.AddDate(0, -6, 0)
	const threads = 200
	step := dataEnd.Sub(start) / threads
	var all []*mailMessage
	for t := 0; t < threads; t++ {
		tp := mailTopics[p.intn(len(mailTopics))]
		who := people[p.intn(len(people))]
		from := fmt.Sprintf("%s <%s>", who.name, who.email)
		if tp.external {
			from = fmt.Sprintf("%s <no-reply@%s>", pick(p, companies), domainOf(pick(p, companies)))
		}
		at := start.Add(step*time.Duration(t) + time.Duration(p.intn(int(step/time.Minute)))*time.Minute)
		rep := fill("{inv}", fmt.Sprintf("INV-2025-%04d", p.between(1, 9999)),
			"{company}", who.company, "{amount}", fmt.Sprintf("€%d,%03d.00", p.between(1, 48), p.intn(1000)),
			"{due}", at.AddDate(0, 0, p.between(3, 30)).Format("Mon 2 Jan 2006"), "{from}", who.name,
			"{first}", who.first, "{ord}", fmt.Sprintf("ord_%04d", p.between(1, OrderCount)),
			"{tkt}", fmt.Sprintf("tkt_%04d", p.between(1, TicketCount)), "{city}", pick(p, places).City,
			"{city2}", pick(p, places).City, "{property}", pick(p, propertyNames), "{num}", strconv.Itoa(p.between(100, 999)))
		subject := rep(tp.subject)
		threadID := ""
		bodies := append([]string{tp.body}, tp.replies...)
		for j, b := range bodies {
			m := &mailMessage{Subject: subject, Body: rep(b), date: at, To: []string{mailUser}, From: from}
			if j > 0 {
				m.Subject = "Re: " + subject
				if j%2 == 1 {
					m.From, m.To = "Jordan Lee <"+mailUser+">", []string{who.email}
				}
			}
			m.ID = hexID(at, uint64(len(all)))
			if threadID == "" {
				threadID = m.ID
			}
			m.ThreadID = threadID
			sent := strings.Contains(m.From, mailUser)
			if sent {
				m.LabelIDs = []string{"SENT"}
			} else {
				m.LabelIDs = append([]string{"INBOX"}, tp.labels...)
				if slices.Contains(tp.labels, "SPAM") {
					m.LabelIDs = slices.Clone(tp.labels)
				}
				if at.After(dataEnd.AddDate(0, 0, -21)) && p.chance(45) {
					m.addLabel("UNREAD")
				}
				if p.chance(8) {
					m.addLabel("STARRED")
				}
				if p.chance(3) {
					m.removeLabel("INBOX")
					m.addLabel("TRASH")
				}
				lastSeen[who.email] = at
			}
			if j == 0 && tp.attach != "" {
				name, mime, _ := strings.Cut(rep(tp.attach), "|")
				data := []byte(fmt.Sprintf("%s\nAttachment %s of message %s, generated for the Acme demo mailbox.\n", mimeHeader(mime), name, m.ID))
				m.Attachments = []mailAttachment{{AttachmentID: "ANGjdJ" + m.ID, Filename: name, MimeType: mime, Size: len(data), data: data}}
			}
			all = append(all, m)
			at = at.Add(time.Duration(p.between(20, 60*30)) * time.Minute)
		}
	}
	slices.SortStableFunc(all, func(a, b *mailMessage) int { return b.date.Compare(a.date) })
	for i, m := range all {
		m.finish(1000 + len(all) - i)
		st.byID[m.ID] = m
	}
	st.msgs = all
	st.historyID = 1000 + len(all)
	for _, m := range all[:20] {
		st.history = append(st.history, historyRecord{ID: m.HistoryID, Messages: []msgRef{m.ref()},
			MessagesAdded: []historyMessage{{m.ref()}}})
	}
	slices.Reverse(st.history)
	st.seq = uint64(len(all))
	for _, pp := range people {
		if t, ok := lastSeen[pp.email]; ok {
			st.contacts = append(st.contacts, mailContact{pp.name, pp.email, pp.company, iso(t)})
		}
	}
	slices.SortFunc(st.contacts, func(a, b mailContact) int { return strings.Compare(a.Name, b.Name) })
	st.contacts = slices.CompactFunc(st.contacts, func(a, b mailContact) bool { return a.EmailAddress == b.EmailAddress })
	for i, d := range []struct{ to, subject, body string }{
		{people[0].email, "Re: Contract renewal", "Hi,\n\nThanks for the proposal. Before we sign, could you confirm the SLA credits apply to partial outages?"},
		{people[3].email, "Intro: Acme x " + people[3].company, "Hi " + people[3].first + ",\n\nI'd like to introduce you to our partnerships lead…"},
		{"team@acme.example", "Offsite agenda (draft)", "Day 1: strategy and roadmap. Day 2: customer panel, then the boat trip."},
	} {
		m := &mailMessage{From: "Jordan Lee <" + mailUser + ">", To: []string{d.to}, Subject: d.subject, Body: d.body,
			LabelIDs: []string{"DRAFT"}, date: dataEnd.Add(-time.Duration(i+1) * time.Hour)}
		st.seq++
		m.ID = hexID(m.date, st.seq)
		m.ThreadID = m.ID
		m.finish(st.historyID)
		st.insert(m)
		id := fmt.Sprintf("r-%019d", 4711000000000000000+uint64(i)*7919)
		st.drafts[id] = m.ID
		st.draftIDs = append(st.draftIDs, id)
	}
	st.filters = []*mailFilter{
		{ID: "ANe1Bmj1", Criteria: map[string]any{"from": "no-reply@globex.example"}, Action: map[string]any{"addLabelIds": []any{"Label_1"}, "removeLabelIds": []any{"INBOX"}}},
		{ID: "ANe1Bmj2", Criteria: map[string]any{"query": "newsletter OR digest"}, Action: map[string]any{"addLabelIds": []any{"Label_5"}}},
	}
	st.vacation = map[string]any{"enableAutoReply": false, "responseSubject": "", "responseBodyPlainText": "",
		"restrictToContacts": false, "restrictToDomain": false}
	st.autoFwd = map[string]any{"enabled": false}
	st.fwdAddrs = []map[string]string{{"forwardingEmail": "jordan.personal@mailbox.example", "verificationStatus": "accepted"}}
	st.imap = map[string]any{"enabled": true, "autoExpunge": true, "expungeBehavior": "archive", "maxFolderSize": 0}
	st.pop = map[string]any{"accessWindow": "disabled", "disposition": "leaveInInbox"}
	st.sendAs = []*sendAs{
		{SendAsEmail: mailUser, DisplayName: "Jordan Lee", Signature: "Jordan Lee\nHead of Operations, Acme", IsPrimary: true, IsDefault: true, VerificationStatus: "accepted"},
		{SendAsEmail: "support@acme.example", DisplayName: "Acme Support", ReplyToAddress: "support@acme.example", Signature: "The Acme Support team", TreatAsAlias: true, VerificationStatus: "accepted"},
	}
	st.delegates = []map[string]string{{"delegateEmail": "sam@acme.example", "verificationStatus": "accepted"}}
	return st
}

// fill returns a function that replaces each {placeholder} of a template
// with its value (pairs as for strings.NewReplacer, which is too costly to
// build once per thread).
func fill(pairs ...string) func(string) string {
	return func(s string) string {
		for i := 0; i+1 < len(pairs) && strings.IndexByte(s, '{') >= 0; i += 2 {
			s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
		}
		return s
	}
}

func mimeHeader(mime string) string {
	switch mime {
	case "application/pdf":
		return "%PDF-1.4"
	case "text/csv":
		return "date,orders,revenue\n2025-06-23,412,18230.50"
	case "text/calendar":
		return "BEGIN:VCALENDAR\nVERSION:2.0\nEND:VCALENDAR"
	}
	return "Notes"
}

// finish fills the fields derived from the others.
func (m *mailMessage) finish(historyID int) {
	m.HistoryID = strconv.Itoa(historyID)
	m.InternalDate = strconv.FormatInt(m.date.UnixMilli(), 10)
	m.Date = m.date.Format(time.RFC1123Z)
	m.Snippet = snippet(m.Body)
	m.SizeEstimate = 600 + len(m.Subject) + len(m.Body)
	if m.Attachments == nil {
		m.Attachments = []mailAttachment{}
	}
	for _, a := range m.Attachments {
		m.SizeEstimate += a.Size * 4 / 3
	}
}

func snippet(body string) string {
	s := strings.Join(strings.Fields(body), " ")
	if r := []rune(s); len(r) > 120 {
		return string(r[:120]) + "…"
	}
	return s
}

func (m *mailMessage) ref() msgRef {
	return msgRef{ID: m.ID, ThreadID: m.ThreadID, LabelIDs: slices.Clone(m.LabelIDs)}
}

// insert adds a message, keeping msgs newest first.
func (st *mailState) insert(m *mailMessage) {
	i, _ := slices.BinarySearchFunc(st.msgs, m, func(a, b *mailMessage) int { return b.date.Compare(a.date) })
	st.msgs = slices.Insert(st.msgs, i, m)
	st.byID[m.ID] = m
}

func (st *mailState) remove(id string) {
	delete(st.byID, id)
	st.msgs = slices.DeleteFunc(st.msgs, func(m *mailMessage) bool { return m.ID == id })
}

// record appends a history record and returns its id.
func (st *mailState) record(h historyRecord) string {
	st.historyID++
	h.ID = strconv.Itoa(st.historyID)
	st.history = append(st.history, h)
	return h.ID
}

func (st *mailState) nextID() string {
	st.seq++
	return hexID(st.now(), st.seq)
}

func (st *mailState) label(idOrName string) *mailLabel {
	for _, l := range st.labels {
		if l.ID == idOrName || strings.EqualFold(l.Name, idOrName) ||
			strings.EqualFold(strings.ReplaceAll(l.Name, " ", "-"), idOrName) {
			return l
		}
	}
	return nil
}

func (st *mailState) message(id string) (*mailMessage, error) {
	if m, ok := st.byID[id]; ok {
		return m, nil
	}
	return nil, errf(404, "Requested entity was not found: message %q.", id)
}

func (st *mailState) thread(id string) ([]*mailMessage, error) {
	var out []*mailMessage
	for i := len(st.msgs) - 1; i >= 0; i-- { // oldest first
		if st.msgs[i].ThreadID == id {
			out = append(out, st.msgs[i])
		}
	}
	if len(out) == 0 {
		return nil, errf(404, "Requested entity was not found: thread %q.", id)
	}
	return out, nil
}

// relabel applies label changes to messages and records them in the
// history. Unknown labels are an error and change nothing.
func (st *mailState) relabel(msgs []*mailMessage, add, remove []string) error {
	for _, l := range slices.Concat(add, remove) {
		if st.label(l) == nil {
			return errf(400, "Invalid label: %s", l)
		}
	}
	for _, m := range msgs {
		var added, removed []string
		for _, l := range add {
			if id := st.label(l).ID; m.addLabel(id) {
				added = append(added, id)
			}
		}
		for _, l := range remove {
			if id := st.label(l).ID; m.removeLabel(id) {
				removed = append(removed, id)
			}
		}
		if len(added)+len(removed) == 0 {
			continue
		}
		h := historyRecord{Messages: []msgRef{m.ref()}}
		if len(added) > 0 {
			h.LabelsAdded = []historyLabels{{m.ref(), added}}
		}
		if len(removed) > 0 {
			h.LabelsRemoved = []historyLabels{{m.ref(), removed}}
		}
		m.HistoryID = st.record(h)
	}
	return nil
}
