package query

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the result as one JSON object: head's members first
// (the caller's: what the rows were and how complete), then
//
//	"rows": rows aggregated,
//	"groupBy": the group_by paths,
//	"groupCount": groups after having,
//	"groups": [{<path>: key, …, <metric>: value, …, "_skipped": {…}}, …],
//	"groupsShown": when fewer groups are shown than there are,
//	"skipped": {<metric>: {"null", "missing", "not_a_number"}} for each metric with a field,
//	"numericStrings": {<metric>: n} when numbers were read from strings,
//	"unmatched": [paths no row reaches], when there are some,
//	"note": what was left out and how to get it, when something was.
//
// Counts are JSON numbers; sums, averages, minima and maxima are JSON
// strings holding the exact decimal; a metric over no number is null. A
// group's "_skipped" lists only its metrics that skipped something.
//
// room bounds the object's characters (0: no bound): groups that do not
// fit are left out, and groupsShown and the note say so.
func (r *AggregateResult) AppendJSON(dst []byte, head []Member, room int) []byte {
	prefix := []byte{'{'}
	for i, m := range head {
		if i > 0 {
			prefix = append(prefix, ',')
		}
		prefix = appendQuoted(prefix, m.Key)
		prefix = append(prefix, ':')
		prefix = append(prefix, m.Value...)
	}
	if len(head) > 0 {
		prefix = append(prefix, ',')
	}
	prefix = append(prefix, `"rows":`...)
	prefix = strconv.AppendInt(prefix, int64(r.Rows), 10)
	prefix = append(prefix, `,"groupBy":[`...)
	for i, g := range r.GroupBy {
		if i > 0 {
			prefix = append(prefix, ',')
		}
		prefix = appendQuoted(prefix, g)
	}
	prefix = append(prefix, `],"groupCount":`...)
	prefix = strconv.AppendInt(prefix, int64(r.GroupCount), 10)
	prefix = append(prefix, `,"groups":[`...)

	groups := make([][]byte, len(r.Groups))
	for i := range r.Groups {
		groups[i] = r.appendGroup(nil, i)
	}
	shown := len(groups)
	if room > 0 {
		fixed := utf8.RuneCount(prefix) + utf8.RuneCount(r.appendTail(nil, max(r.GroupCount-1, 0))) + 2
		left := room - fixed
		shown = 0
		for _, g := range groups {
			n := utf8.RuneCount(g) + 1
			if n > left {
				break
			}
			left -= n
			shown++
		}
	}
	dst = append(dst, prefix...)
	for i, g := range groups[:shown] {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, g...)
	}
	dst = append(dst, ']')
	dst = r.appendTail(dst, shown)
	return append(dst, '}')
}

// appendGroup renders group i.
func (r *AggregateResult) appendGroup(dst []byte, i int) []byte {
	g := r.Groups[i]
	dst = append(dst, '{')
	n := 0
	sep := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	for k, path := range r.GroupBy {
		sep()
		dst = appendQuoted(dst, path)
		dst = append(dst, ':')
		dst = append(dst, g.Key[k]...)
	}
	for mi, m := range r.Metrics {
		sep()
		dst = appendQuoted(dst, m.Name)
		dst = append(dst, ':')
		dst = appendValue(dst, g.Values[mi])
	}
	first := true
	for mi, m := range r.Metrics {
		if g.Skipped[mi].Total() == 0 {
			continue
		}
		if first {
			sep()
			dst = append(dst, `"_skipped":{`...)
		} else {
			dst = append(dst, ',')
		}
		first = false
		dst = appendQuoted(dst, m.Name)
		dst = append(dst, ':')
		dst = appendSkipped(dst, g.Skipped[mi])
	}
	if !first {
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

func appendValue(dst []byte, v Value) []byte {
	switch {
	case v.Null():
		return append(dst, "null"...)
	case v.Count:
		return append(dst, v.Text...)
	}
	return appendQuoted(dst, v.Text)
}

func appendSkipped(dst []byte, s Skipped) []byte {
	dst = append(dst, `{"null":`...)
	dst = strconv.AppendInt(dst, int64(s.Null), 10)
	dst = append(dst, `,"missing":`...)
	dst = strconv.AppendInt(dst, int64(s.Missing), 10)
	dst = append(dst, `,"not_a_number":`...)
	dst = strconv.AppendInt(dst, int64(s.NotANumber), 10)
	if s.OutOfRange > 0 {
		dst = append(dst, `,"out_of_range":`...)
		dst = strconv.AppendInt(dst, int64(s.OutOfRange), 10)
	}
	return append(dst, '}')
}

// appendTail renders the members after groups, for shown groups shown.
func (r *AggregateResult) appendTail(dst []byte, shown int) []byte {
	if shown < r.GroupCount {
		dst = append(dst, `,"groupsShown":`...)
		dst = strconv.AppendInt(dst, int64(shown), 10)
	}
	first := true
	for mi, m := range r.Metrics {
		if m.Field == "" {
			continue
		}
		if first {
			dst = append(dst, `,"skipped":{`...)
		} else {
			dst = append(dst, ',')
		}
		first = false
		dst = appendQuoted(dst, m.Name)
		dst = append(dst, ':')
		dst = appendSkipped(dst, r.Skipped[mi])
	}
	if !first {
		dst = append(dst, '}')
	}
	first = true
	for mi, m := range r.Metrics {
		if r.NumericStrings[mi] == 0 {
			continue
		}
		if first {
			dst = append(dst, `,"numericStrings":{`...)
		} else {
			dst = append(dst, ',')
		}
		first = false
		dst = appendQuoted(dst, m.Name)
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, int64(r.NumericStrings[mi]), 10)
	}
	if !first {
		dst = append(dst, '}')
	}
	if len(r.Unmatched) > 0 {
		dst = append(dst, `,"unmatched":[`...)
		for i, p := range r.Unmatched {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendQuoted(dst, p)
		}
		dst = append(dst, ']')
	}
	if note := r.note(shown); note != "" {
		dst = append(dst, `,"note":`...)
		dst = appendQuoted(dst, note)
	}
	return dst
}

// note says what the groups shown leave out, and how to get it.
func (r *AggregateResult) note(shown int) string {
	var s string
	if r.LimitAsked > 0 {
		s = fmt.Sprintf("limit was lowered to the maximum, %d. ", r.Limit)
	}
	switch {
	case shown < len(r.Groups):
		s += fmt.Sprintf("Only %d of the %d groups fit in the conversation; ask for fewer groups (limit, having) or fewer metrics.", shown, r.GroupCount)
	case shown < r.GroupCount:
		s += fmt.Sprintf("Only the first %d of the %d groups are shown (limit %d, in order_by order); raise limit (at most %d) or narrow with having.", shown, r.GroupCount, r.Limit, MaxAggregateLimit)
	}
	if len(r.Unmatched) > 0 {
		if s != "" {
			s += " "
		}
		s += "No row has the unmatched paths (check their spelling): their rows are in the null group, or their values missing."
	}
	return s
}
