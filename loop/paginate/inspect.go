package paginate

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/trawl-dev/trawl/tools"
)

// Inspection is what `trawl inspect` reports for one operation: which
// tool it became and how it paginates. It marshals as
//
//	{"tool","method","path","operationId","effect","pagination":{"strategy","sizeParam",
//	 "pageParam","offsetParam","cursorParam","paramsIn","items","continuation","provenance",
//	 "confidence","evidence","stream"?}}
//
// with null wherever a field does not apply.
type Inspection struct {
	Tool        string            `json:"tool"`
	Method      string            `json:"method"`
	Path        string            `json:"path"`
	OperationID *string           `json:"operationId"` // null when the spec gives none
	Effect      tools.Effect      `json:"effect"`      // read, write or destructive (Effect)
	Pagination  PaginationSummary `json:"pagination"`

	note string // one remark for the table (a signal with nothing to send it back)
}

// PaginationSummary is a Plan as people read it. Request-side names and
// the continuation are null for an operation that is not paginated; Items
// is the path of the primary array for every list operation ("" for a
// bare array), null when none is known.
type PaginationSummary struct {
	Strategy     Strategy `json:"strategy"`
	SizeParam    *string  `json:"sizeParam"`
	PageParam    *string  `json:"pageParam"`
	OffsetParam  *string  `json:"offsetParam"`
	CursorParam  *string  `json:"cursorParam"`
	ParamsIn     *string  `json:"paramsIn"`
	Items        *string  `json:"items"`
	Continuation *string  `json:"continuation"`
	Provenance   string   `json:"provenance"`
	// Confidence (high, medium, low) and the evidence it rests on.
	Confidence Confidence `json:"confidence"`
	Evidence   []string   `json:"evidence"`
	Stream     bool       `json:"stream,omitempty"` // an event stream: never ends by itself
}

// Inspect detects the pagination of every tool.
func Inspect(ts []*tools.Tool) []Inspection {
	out := make([]Inspection, 0, len(ts))
	for _, t := range ts {
		if t == nil {
			continue
		}
		out = append(out, NewInspection(t, Detect(t)))
	}
	return out
}

// NewInspection reports plan p (from Detect, possibly refined) for t.
func NewInspection(t *tools.Tool, p Plan) Inspection {
	in := Inspection{
		Tool:        t.Name,
		Method:      strings.ToUpper(t.Method),
		Path:        t.Path,
		OperationID: nullable(t.OperationID),
		Effect:      Effect(t, p, ""),
	}
	s := PaginationSummary{Strategy: p.Strategy, Provenance: p.Provenance, Confidence: p.Confidence,
		Evidence: p.Evidence, Stream: p.Stream}
	if s.Evidence == nil {
		s.Evidence = []string{}
	}
	if s.Strategy == "" {
		s.Strategy = None
	}
	if p.ItemsFound {
		items := showPath(p.Items)
		s.Items = &items
	}
	if p.Paginated() {
		s.SizeParam = nullable(p.SizeParam)
		s.PageParam = nullable(p.PageParam)
		s.OffsetParam = nullable(p.OffsetParam)
		s.CursorParam = nullable(p.CursorParam)
		s.ParamsIn = nullable(p.ParamsIn)
		s.Continuation = nullable(p.Continuation)
	}
	in.Pagination = s
	switch {
	case !p.Paginated() && p.NextToken != "":
		in.note = fmt.Sprintf("response has %s but no parameter sends it back", showPath(p.NextToken))
	case !p.Paginated() && p.CursorParam != "":
		in.note = fmt.Sprintf("%s looks like a cursor, but the response declares none to send", p.CursorParam)
	case p.Strategy == Cursor && p.CursorFromItem != "":
		in.note = fmt.Sprintf("cursor = last item's %s", p.CursorFromItem)
	case p.Strategy == Cursor && p.NextToken == "":
		in.note = "no declared token or item id: the first response must supply one"
	case p.Paginated() && !p.ItemsFound:
		in.note = "items not declared: the first response must show them"
	}
	return in
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// summaryOrder lists strategies in the order the summary line counts them.
var summaryOrder = []Strategy{Cursor, NextURL, LinkHeader, PageNumber, Offset}

// TableHeader is the header of WriteTable's table.
var TableHeader = []string{"METHOD", "PATH", "TOOL", "EFFECT", "STRATEGY", "CONFIDENCE", "PARAMS", "ITEMS", "CONTINUATION", "PROVENANCE", "NOTE"}

// TableRows are WriteTable's rows, one operation a row, each cell as
// printed (for a caller that lays the table out itself, such as a
// terminal of a given width).
func TableRows(ins []Inspection) [][]string {
	rows := make([][]string, 0, len(ins))
	for _, in := range ins {
		p := in.Pagination
		var params []string
		for _, kv := range []struct {
			k string
			v *string
		}{{"size", p.SizeParam}, {"page", p.PageParam}, {"offset", p.OffsetParam}, {"cursor", p.CursorParam}} {
			if kv.v != nil {
				params = append(params, kv.k+"="+*kv.v)
			}
		}
		if len(params) > 0 && p.ParamsIn != nil && *p.ParamsIn != "query" {
			params = append(params, "in "+*p.ParamsIn)
		}
		items := "-"
		if p.Items != nil {
			items = *p.Items
			if items == "" {
				items = "(bare array)"
			}
		}
		note := in.note
		if p.Confidence != High && len(p.Evidence) > 0 {
			// Say why when detection is not sure.
			note = strings.Join(append(p.Evidence[len(p.Evidence)-1:], note), "; ")
			note = strings.TrimSuffix(note, "; ")
		}
		rows = append(rows, []string{cell(in.Method), cell(in.Path), cell(in.Tool), string(in.Effect), string(p.Strategy),
			orDash(string(p.Confidence)), orDash(strings.Join(params, " ")), cell(items), cell(deref(p.Continuation)),
			cell(p.Provenance), cell(note)})
	}
	return rows
}

// TableSummary are the lines after WriteTable's table: the counts
// ("51 operations, 40 paginated: 14 cursor, 6 next_url, …"), then how
// many were detected with low confidence, when any were.
func TableSummary(ins []Inspection) []string {
	counts := map[Strategy]int{}
	paginated, unsure := 0, 0
	effects := map[tools.Effect]int{}
	for _, in := range ins {
		p := in.Pagination
		effects[in.Effect]++
		if p.Strategy != None && p.Strategy != "" {
			paginated++
			counts[p.Strategy]++
			if p.Confidence == Low || p.Stream {
				unsure++
			}
		}
	}
	summary := fmt.Sprintf("%d operation%s, %d paginated", len(ins), plural(len(ins)), paginated)
	var parts []string
	for _, s := range summaryOrder {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	if len(parts) > 0 {
		summary += ": " + strings.Join(parts, ", ")
	}
	summary += fmt.Sprintf("; %d read, %d write, %d destructive",
		effects[tools.EffectRead], effects[tools.EffectWrite], effects[tools.EffectDestructive])
	lines := []string{summary}
	if unsure > 0 {
		lines = append(lines, fmt.Sprintf("%d paginated operation%s detected with low confidence: a walk on them completes only on the server's own end signal", unsure, plural(unsure)))
	}
	return lines
}

// WriteTable writes ins as an aligned table, one operation a row, then a
// summary line ("51 operations, 40 paginated: 14 cursor, 6 next_url, …").
func WriteTable(w io.Writer, ins []Inspection) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(TableHeader, "\t"))
	for _, row := range TableRows(ins) {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range TableSummary(ins) {
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// WriteImportWarnings lists what a lenient import repaired or skipped,
// one line each, after a blank line; nothing when there is nothing.
func WriteImportWarnings(w io.Writer, ws []tools.ImportWarning) error {
	if len(ws) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\nimport: %d warning%s\n", len(ws), plural(len(ws))); err != nil {
		return err
	}
	for _, x := range ws {
		if _, err := fmt.Fprintln(w, "  "+cell(x.String())); err != nil {
			return err
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cell keeps a value on one table row: specs put tabs and newlines in
// odd places.
func cell(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
	return orDash(s)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
