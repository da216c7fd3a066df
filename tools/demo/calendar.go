package demo

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The calendar backend is Google Calendar-like: calendars hold events with
// start/end objects, lists page with maxResults + pageToken, free/busy
// answers busy intervals per calendar.

type calCalendar struct {
	ID          string `json:"id"`
	Summary     string `json:"summary"`
	Description string `json:"description,omitempty"`
	TimeZone    string `json:"timeZone"`
	AccessRole  string `json:"accessRole"`
	Primary     bool   `json:"primary,omitempty"`
}

type calTime struct {
	DateTime string `json:"dateTime,omitempty"`
	Date     string `json:"date,omitempty"`
	TimeZone string `json:"timeZone,omitempty"`
}

type calAttendee struct {
	Email          string `json:"email"`
	ResponseStatus string `json:"responseStatus"`
	Organizer      bool   `json:"organizer,omitempty"`
}

type calEvent struct {
	ID          string        `json:"id"`
	Status      string        `json:"status"`
	Summary     string        `json:"summary"`
	Description string        `json:"description,omitempty"`
	Location    string        `json:"location,omitempty"`
	Start       calTime       `json:"start"`
	End         calTime       `json:"end"`
	Attendees   []calAttendee `json:"attendees,omitempty"`
	Organizer   struct {
		Email string `json:"email"`
	} `json:"organizer"`
	HTMLLink string `json:"htmlLink"`
	Created  string `json:"created"`
	Updated  string `json:"updated"`
	start    time.Time
	end      time.Time
}

type calendarState struct {
	now       func() time.Time
	codec     cursorCodec
	seq       int
	calendars []*calCalendar
	events    map[string][]*calEvent // by calendar id, start ascending
}

var meetingKinds = []struct{ summary, location string }{
	{"Weekly ops sync", "Room 4B"}, {"1:1 with Sam", "Video call"}, {"Pricing review", "Room 2A"},
	{"Customer call: %s", "Video call"}, {"Quarterly business review — %s", "%s office"}, {"Warehouse walkthrough", "Warehouse, Dock 3"},
	{"Hiring panel: support lead", "Room 1C"}, {"Lunch with %s", "Cantina"}, {"Board prep", "Room 4B"}, {"Focus time", ""},
}

func newCalendarState(now func() time.Time) *calendarState {
	p := newPRNG(0xCA1)
	st := &calendarState{now: now, codec: cursorCodec{key: []byte("calendar-page-v1")}, events: map[string][]*calEvent{}}
	st.calendars = []*calCalendar{
		{ID: mailUser, Summary: "Jordan Lee", TimeZone: "UTC", AccessRole: "owner", Primary: true},
		{ID: "team@acme.example", Summary: "Team Acme", Description: "Shared team calendar: offsites, launches, on-call.", TimeZone: "UTC", AccessRole: "writer"},
		{ID: "holidays@acme.example", Summary: "Public holidays", TimeZone: "UTC", AccessRole: "reader"},
	}
	from := time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)
	for d := 0; d < 150; d++ {
		day := from.AddDate(0, 0, d)
		if wd := day.Weekday(); wd == time.Saturday || wd == time.Sunday {
			continue
		}
		for k := p.intn(4); k > 0; k-- {
			mk := pick(p, meetingKinds)
			co := pick(p, companies)
			summary := mk.summary
			if strings.Contains(summary, "%s") {
				summary = fmt.Sprintf(summary, co)
			}
			loc := strings.ReplaceAll(mk.location, "%s", co)
			start := day.Add(time.Duration(p.between(16, 34)) * 30 * time.Minute)
			e := st.newEvent(mailUser, summary, loc, start, start.Add(time.Duration(p.between(1, 4))*30*time.Minute))
			e.Attendees = []calAttendee{{Email: mailUser, ResponseStatus: "accepted", Organizer: true}}
			for n := p.intn(3); n > 0; n-- {
				fn, ln := pick(p, firstNames), pick(p, lastNames)
				e.Attendees = append(e.Attendees, calAttendee{Email: emailLocal(fn, ln) + "@" + domainOf(co),
					ResponseStatus: pick(p, []string{"accepted", "tentative", "needsAction", "declined"})})
			}
		}
		if d%14 == 2 {
			st.newEvent("team@acme.example", pick(p, []string{"Launch: summer catalogue", "Team offsite", "On-call handover", "All-hands"}),
				"HQ", day.Add(15*time.Hour), day.Add(17*time.Hour))
		}
	}
	for _, h := range []struct{ date, name string }{{"2025-04-18", "Good Friday"}, {"2025-04-25", "Freedom Day"},
		{"2025-05-01", "Labour Day"}, {"2025-06-10", "Portugal Day"}, {"2025-06-13", "St Anthony's Day"}, {"2025-08-15", "Assumption Day"}} {
		t, _ := time.Parse(time.DateOnly, h.date)
		e := st.newEvent("holidays@acme.example", h.name, "", t, t.AddDate(0, 0, 1))
		e.Start, e.End = calTime{Date: h.date}, calTime{Date: t.AddDate(0, 0, 1).Format(time.DateOnly)}
	}
	return st
}

// newEvent adds an event to a calendar, keeping start order.
func (st *calendarState) newEvent(cal, summary, location string, start, end time.Time) *calEvent {
	st.seq++
	e := &calEvent{ID: fmt.Sprintf("%s%04d", strconv.FormatUint(uint64(start.Unix())*2654435761%(1<<40), 36), st.seq),
		Status: "confirmed", Summary: summary, Location: location, start: start, end: end,
		Created: iso(start.AddDate(0, 0, -7)), Updated: iso(start.AddDate(0, 0, -7))}
	e.Organizer.Email = cal
	e.HTMLLink = "https://calendar.acme.example/event?eid=" + e.ID
	e.setTimes()
	st.insert(cal, e)
	return e
}

func (e *calEvent) setTimes() {
	e.Start = calTime{DateTime: e.start.UTC().Format(time.RFC3339), TimeZone: "UTC"}
	e.End = calTime{DateTime: e.end.UTC().Format(time.RFC3339), TimeZone: "UTC"}
}

func (st *calendarState) insert(cal string, e *calEvent) {
	list := st.events[cal]
	i, _ := slices.BinarySearchFunc(list, e, func(a, b *calEvent) int { return a.start.Compare(b.start) })
	st.events[cal] = slices.Insert(list, i, e)
}

func (s *Server) routeCalendar() {
	h := func(pattern string, f func(*calendarState, args, *http.Request) (any, error)) {
		method, path, _ := strings.Cut(pattern, " ")
		handle(s.mux, method+" /calendar"+path, s.cal, googleStyle, f)
	}
	h("GET /calendars", (*calendarState).listCalendars)
	h("GET /calendars/{calendarId}/events", (*calendarState).listEvents)
	h("POST /calendars/{calendarId}/events", (*calendarState).createEvent)
	h("POST /calendars/{calendarId}/events/quickAdd", (*calendarState).quickAdd)
	h("GET /calendars/{calendarId}/events/{eventId}", (*calendarState).getEvent)
	h("PATCH /calendars/{calendarId}/events/{eventId}", (*calendarState).updateEvent)
	h("DELETE /calendars/{calendarId}/events/{eventId}", (*calendarState).deleteEvent)
	h("POST /freeBusy", (*calendarState).freeBusy)
}

func (st *calendarState) calendar(id string, write bool) (*calCalendar, error) {
	if id == "primary" {
		id = mailUser
	}
	for _, c := range st.calendars {
		if c.ID == id {
			if write && c.AccessRole == "reader" {
				return nil, errf(http.StatusForbidden, "You need to have writer access to calendar %q.", id)
			}
			return c, nil
		}
	}
	return nil, errf(http.StatusNotFound, "Calendar %q not found. List calendars to see the ids you can use.", id)
}

func (st *calendarState) listCalendars(a args, _ *http.Request) (any, error) {
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 250, st.calendars)
	if err != nil {
		return nil, err
	}
	return struct {
		Kind          string         `json:"kind"`
		Items         []*calCalendar `json:"items"`
		NextPageToken string         `json:"nextPageToken,omitempty"`
	}{"calendar#calendarList", page, next}, nil
}

func timeArg(a args, name string) (time.Time, bool, error) {
	v := a.str(name)
	if v == "" {
		return time.Time{}, false, nil
	}
	if m, ok := a.body[name].(map[string]any); ok {
		v = scalar(m["dateTime"])
		if v == "" {
			v = scalar(m["date"])
		}
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true, nil
		}
	}
	return time.Time{}, false, errf(http.StatusBadRequest, "Invalid %s %q: use RFC 3339, e.g. 2025-07-01T09:00:00Z.", name, v)
}

func (st *calendarState) listEvents(a args, r *http.Request) (any, error) {
	cal, err := st.calendar(r.PathValue("calendarId"), false)
	if err != nil {
		return nil, err
	}
	tmin, hasMin, err := timeArg(a, "timeMin")
	if err != nil {
		return nil, err
	}
	tmax, hasMax, err := timeArg(a, "timeMax")
	if err != nil {
		return nil, err
	}
	order := a.str("orderBy")
	if order != "" && order != "startTime" && order != "updated" {
		return nil, errf(http.StatusBadRequest, "Invalid orderBy %q: use startTime or updated.", order)
	}
	q := a.str("q")
	all := []*calEvent{}
	for _, e := range st.events[cal.ID] {
		if (hasMin && !e.end.After(tmin)) || (hasMax && !e.start.Before(tmax)) {
			continue
		}
		if q != "" && !containsFold(e.Summary, q) && !containsFold(e.Description, q) && !containsFold(e.Location, q) &&
			!slices.ContainsFunc(e.Attendees, func(at calAttendee) bool { return containsFold(at.Email, q) }) {
			continue
		}
		all = append(all, e)
	}
	if order == "updated" {
		slices.SortStableFunc(all, func(a, b *calEvent) int { return strings.Compare(a.Updated, b.Updated) })
	}
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 250, 2500, all)
	if err != nil {
		return nil, err
	}
	return struct {
		Kind          string      `json:"kind"`
		Summary       string      `json:"summary"`
		TimeZone      string      `json:"timeZone"`
		Items         []*calEvent `json:"items"`
		NextPageToken string      `json:"nextPageToken,omitempty"`
	}{"calendar#events", cal.Summary, cal.TimeZone, page, next}, nil
}

func (st *calendarState) event(calID, id string, write bool) (*calCalendar, int, error) {
	cal, err := st.calendar(calID, write)
	if err != nil {
		return nil, 0, err
	}
	i := slices.IndexFunc(st.events[cal.ID], func(e *calEvent) bool { return e.ID == id })
	if i < 0 {
		return nil, 0, errf(http.StatusNotFound, "Event %q not found in calendar %q.", id, cal.ID)
	}
	return cal, i, nil
}

func (st *calendarState) getEvent(_ args, r *http.Request) (any, error) {
	cal, i, err := st.event(r.PathValue("calendarId"), r.PathValue("eventId"), false)
	if err != nil {
		return nil, err
	}
	return st.events[cal.ID][i], nil
}

// applyEvent sets the fields given in a on e; it checks the result.
func applyEvent(e *calEvent, a args) error {
	for name, dst := range map[string]*string{"summary": &e.Summary, "description": &e.Description, "location": &e.Location} {
		if a.has(name) {
			*dst = a.str(name)
		}
	}
	if t, ok, err := timeArg(a, "start"); err != nil {
		return err
	} else if ok {
		d := e.end.Sub(e.start)
		e.start = t
		if !a.has("end") && d > 0 {
			e.end = t.Add(d)
		}
	}
	if t, ok, err := timeArg(a, "end"); err != nil {
		return err
	} else if ok {
		e.end = t
	}
	if !e.end.After(e.start) {
		return errf(http.StatusBadRequest, "The requested time range is empty: end must be after start.")
	}
	if a.has("attendees") {
		e.Attendees = []calAttendee{{Email: e.Organizer.Email, ResponseStatus: "accepted", Organizer: true}}
		for _, em := range a.strs("attendees") {
			if !emailRE.MatchString(em) {
				return errf(http.StatusBadRequest, "Invalid attendee email %q.", em)
			}
			e.Attendees = append(e.Attendees, calAttendee{Email: em, ResponseStatus: "needsAction"})
		}
	}
	e.setTimes()
	return nil
}

func (st *calendarState) createEvent(a args, r *http.Request) (any, error) {
	cal, err := st.calendar(r.PathValue("calendarId"), true)
	if err != nil {
		return nil, err
	}
	if _, err := a.required("start"); err != nil {
		return nil, err
	}
	if _, err := a.required("end"); err != nil {
		return nil, err
	}
	e := &calEvent{Status: "confirmed", Summary: "(No title)", Created: iso(st.now()), Updated: iso(st.now())}
	e.Organizer.Email = cal.ID
	if err := applyEvent(e, a); err != nil {
		return nil, err
	}
	st.seq++
	e.ID = fmt.Sprintf("%sn%04d", strconv.FormatUint(uint64(e.start.Unix())*2654435761%(1<<40), 36), st.seq)
	e.HTMLLink = "https://calendar.acme.example/event?eid=" + e.ID
	st.insert(cal.ID, e)
	return e, nil
}

func (st *calendarState) updateEvent(a args, r *http.Request) (any, error) {
	cal, i, err := st.event(r.PathValue("calendarId"), r.PathValue("eventId"), true)
	if err != nil {
		return nil, err
	}
	e := *st.events[cal.ID][i]
	if err := applyEvent(&e, a); err != nil {
		return nil, err
	}
	e.Updated = iso(st.now())
	st.events[cal.ID] = slices.Delete(st.events[cal.ID], i, i+1)
	st.insert(cal.ID, &e)
	return &e, nil
}

func (st *calendarState) deleteEvent(_ args, r *http.Request) (any, error) {
	cal, i, err := st.event(r.PathValue("calendarId"), r.PathValue("eventId"), true)
	if err == nil {
		st.events[cal.ID] = slices.Delete(st.events[cal.ID], i, i+1)
	}
	return nil, err
}

var (
	quickTimeRE = regexp.MustCompile(`(?i)\s*\bat (\d{1,2})(?::(\d{2}))?\s*(am|pm)?\b`)
	quickDurRE  = regexp.MustCompile(`(?i)\s*\bfor (\d+)\s*(minutes?|mins?|hours?|hrs?|h)\b`)
	quickDateRE = regexp.MustCompile(`(?i)\s*\b(?:on )?(today|tomorrow|monday|tuesday|wednesday|thursday|friday|saturday|sunday|\d{4}-\d{2}-\d{2})\b`)
)

// quickAdd creates an event from a sentence such as "Lunch with Sam
// tomorrow at 12:30 for 45 minutes": a day (today, tomorrow, a weekday or
// an ISO date; default today), a time (default 09:00) and a duration
// (default one hour), all relative to the server's clock, in UTC.
func (st *calendarState) quickAdd(a args, r *http.Request) (any, error) {
	cal, err := st.calendar(r.PathValue("calendarId"), true)
	if err != nil {
		return nil, err
	}
	text, err := a.required("text")
	if err != nil {
		return nil, err
	}
	now := st.now().UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	if m := quickDateRE.FindStringSubmatch(text); m != nil {
		w := strings.ToLower(m[1])
		switch {
		case w == "tomorrow":
			day = day.AddDate(0, 0, 1)
		case w == "today":
		case strings.Contains(w, "-"):
			if day, err = time.Parse(time.DateOnly, w); err != nil {
				return nil, errf(http.StatusBadRequest, "Invalid date %q in text.", w)
			}
		default:
			for day.Weekday().String() != strings.ToUpper(w[:1])+w[1:] || !day.After(now.Add(-24*time.Hour)) {
				day = day.AddDate(0, 0, 1)
			}
		}
		text = strings.Replace(text, m[0], "", 1)
	}
	hour, minute := 9, 0
	if m := quickTimeRE.FindStringSubmatch(text); m != nil {
		hour, _ = strconv.Atoi(m[1])
		minute, _ = strconv.Atoi(m[2])
		switch strings.ToLower(m[3]) {
		case "pm":
			if hour < 12 {
				hour += 12
			}
		case "am":
			if hour == 12 {
				hour = 0
			}
		}
		if hour > 23 || minute > 59 {
			return nil, errf(http.StatusBadRequest, "Invalid time %q in text.", strings.TrimSpace(m[0]))
		}
		text = strings.Replace(text, m[0], "", 1)
	}
	dur := time.Hour
	if m := quickDurRE.FindStringSubmatch(text); m != nil {
		n, _ := strconv.Atoi(m[1])
		dur = time.Duration(n) * time.Minute
		if strings.HasPrefix(strings.ToLower(m[2]), "h") {
			dur = time.Duration(n) * time.Hour
		}
		text = strings.Replace(text, m[0], "", 1)
	}
	if dur <= 0 {
		return nil, errf(http.StatusBadRequest, "The event duration must be positive.")
	}
	start := day.Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute)
	summary := strings.TrimSpace(text)
	if summary == "" {
		summary = "(No title)"
	}
	e := st.newEvent(cal.ID, summary, "", start, start.Add(dur))
	e.Created, e.Updated = iso(now), iso(now)
	return e, nil
}

func (st *calendarState) freeBusy(a args, _ *http.Request) (any, error) {
	tmin, okMin, err := timeArg(a, "timeMin")
	if err != nil {
		return nil, err
	}
	tmax, okMax, err := timeArg(a, "timeMax")
	if err != nil {
		return nil, err
	}
	if !okMin || !okMax {
		return nil, errf(http.StatusBadRequest, "Missing required arguments timeMin and timeMax.")
	}
	if !tmax.After(tmin) || tmax.Sub(tmin) > 62*24*time.Hour {
		return nil, errf(http.StatusBadRequest, "The time range must be positive and at most 62 days.")
	}
	ids := a.strs("calendarIds")
	if len(ids) == 0 {
		ids = []string{"primary"}
	}
	type interval struct {
		Start string `json:"start"`
		End   string `json:"end"`
	}
	out := map[string]any{}
	for _, id := range ids {
		cal, err := st.calendar(id, false)
		if err != nil {
			out[id] = map[string]any{"errors": []map[string]string{{"domain": "global", "reason": "notFound"}}}
			continue
		}
		busy := []interval{}
		for _, e := range st.events[cal.ID] {
			if e.Status == "confirmed" && e.end.After(tmin) && e.start.Before(tmax) {
				busy = append(busy, interval{iso(maxTime(e.start, tmin)), iso(minTime(e.end, tmax))})
			}
		}
		out[id] = map[string]any{"busy": busy}
	}
	return map[string]any{"kind": "calendar#freeBusy", "timeMin": iso(tmin), "timeMax": iso(tmax), "calendars": out}, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
