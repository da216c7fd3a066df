package paginate

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/trawl-dev/trawl/tools"
)

// ---- names ----

// foldName folds a parameter or property name for matching: lower case,
// without the separators vendors put between words, so that page_size,
// pageSize, PageSize, page-size, page[size], $top and @odata.nextLink
// compare equal to pagesize, top and odatanextlink.
func foldName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch r {
		case '_', '-', '$', '[', ']', '.', '@', ' ':
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Request-side names, folded, best first within each role.
var (
	sizeNames   = []string{"itemsperpage", "perpage", "pagesize", "maxresults", "limit", "pagelimit", "top", "maxpagesize", "maxitems", "count", "size"}
	pageNames   = []string{"page", "pagenumber", "pageindex", "pageno", "pagenum"}
	offsetNames = []string{"offset", "skip", "startindex", "startat", "pageoffset", "start"}
	cursorNames = []string{
		"cursor", "after", "startingafter", "pagetoken", "marker", "continuation",
		"continuationtoken", "pageafter", "pagecursor", "nextpagetoken", "nexttoken",
		"nextcursor", "startcursor", "skiptoken", "nextpage", "sync", "since",
		"afterid", "batchtoken", "pagenextrecordid", "nextrecordid", "streamposition",
		// Last: before pages backwards, the way to walk a newest-first
		// keyset (Discord's messages) when it is the only way.
		"before",
	}
	// opaqueCursors cannot be made from an item: a response that does not
	// carry one hands it over out of band (a Link header).
	opaqueCursors = []string{"cursor", "pagetoken", "continuation", "continuationtoken", "marker", "batchtoken", "skiptoken", "pagecursor", "nexttoken", "nextpagetoken"}
	// keysetCursors are item ids or positions sent back as they are.
	keysetCursors = []string{"after", "before", "startingafter", "afterid", "since"}
)

// dateLike matches descriptions of time filters, which share names with
// cursors (GitHub's since is a timestamp on most operations, a user id on
// /users).
var dateLike = regexp.MustCompile(`(?i)\b(timestamp|iso[ -]?8601|date-time|datetime|yyyy-mm-dd)\b`)

func isDateFormat(f string) bool {
	switch strings.ToLower(f) {
	case "date", "date-time", "datetime", "time", "date-time-rfc-2822", "unix-time":
		return true
	}
	return false
}

// ---- request side ----

// pagingParam is one parameter (or body property) that plays a paging
// role.
type pagingParam struct {
	name string // as the tool names it; "<param>.<property>" one level down
	in   tools.Location
	rank int // index in its role's name list
	pos  int // order among the tool's parameters
}

func (a pagingParam) better(b pagingParam) bool {
	if b.name == "" {
		return true
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.pos < b.pos
}

// paramOffer is what the parameters offer, one best candidate per role.
type paramOffer struct {
	size, page, offset, cursor pagingParam
	// pageStr and offsetStr are a page or offset typed as a string: a
	// cursor in disguise (Stripe search, Asana) unless the response counts
	// pages (Slack files.list).
	pageStr, offsetStr pagingParam
	// dated is a cursor-named parameter that reads as a time filter; it is
	// the cursor only when the response returns a next token (Plaid's
	// date-time cursor).
	dated pagingParam
	// before and after are the two ends of a keyset window, when both
	// are offered; around marks a timeline read around one id.
	before, after pagingParam
	around        bool
	// descs holds the descriptions of the paging candidates, by name.
	descs map[string]string
}

func (r paramOffer) any() bool {
	return r.size.name != "" || r.page.name != "" || r.offset.name != "" ||
		r.cursor.name != "" || r.pageStr.name != "" || r.offsetStr.name != ""
}

// cursorFolds are the folded wire names of the cursor candidates: a
// response member of the same name is the next token (Asana's sync).
func (r paramOffer) cursorFolds() []string {
	var out []string
	for _, c := range []pagingParam{r.cursor, r.pageStr, r.offsetStr} {
		if c.name != "" {
			out = append(out, foldName(lastSegment(c.name)))
		}
	}
	return out
}

func lastSegment(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}

func readParams(t *tools.Tool) paramOffer {
	var r paramOffer
	pos := 0
	consider := func(name, wire string, in tools.Location, s *tools.Schema) {
		pos++
		typ, format, desc := "", "", ""
		if s != nil {
			typ, format, desc = s.Type, s.Format, s.Description
		}
		f := foldName(wire)
		if f == "" {
			f = foldName(name)
		}
		put := func(dst *pagingParam, rank int) {
			c := pagingParam{name: name, in: in, rank: rank, pos: pos}
			if c.better(*dst) {
				*dst = c
			}
		}
		numeric := typ == "integer" || typ == "number" || typ == ""
		// "size" alone (Spring's page+size) is too common a word to
		// take unless it is a number.
		if i := slices.Index(sizeNames, f); i >= 0 && (numeric || typ == "string" && f != "size") {
			put(&r.size, i)
		}
		if i := slices.Index(pageNames, f); i >= 0 {
			switch {
			case numeric:
				put(&r.page, i)
			case typ == "string" && !isDateFormat(format):
				put(&r.pageStr, i)
			}
		}
		if i := slices.Index(offsetNames, f); i >= 0 {
			switch {
			case typ == "integer" || typ == "number" || (typ == "" && f != "start"):
				put(&r.offset, i)
			case typ == "string" && f != "start" && !isDateFormat(format):
				put(&r.offsetStr, i)
			}
		}
		if i := slices.Index(cursorNames, f); i >= 0 && (numeric || typ == "string") {
			if !isDateFormat(format) && !dateLike.MatchString(desc) {
				put(&r.cursor, i)
				switch f {
				case "before":
					put(&r.before, i)
				case "after":
					put(&r.after, i)
				}
			} else if f != "since" {
				put(&r.dated, i)
			}
		}
		if f == "around" {
			r.around = true
		}
		if desc != "" {
			if r.descs == nil {
				r.descs = map[string]string{}
			}
			r.descs[name] = desc
		}
	}
	for _, p := range t.Params {
		if p.In == tools.InPath {
			continue
		}
		if p.In == tools.InBody && p.Schema != nil && len(p.Schema.Properties) > 0 &&
			(p.Schema.Type == "object" || p.Schema.Type == "") {
			// One level down: the properties of a whole-body or object
			// body parameter.
			for _, k := range sortedNames(p.Schema.Properties) {
				consider(p.Name+"."+k, k, tools.InBody, p.Schema.Properties[k])
			}
			continue
		}
		s := p.Schema
		if p.Description != "" && (s == nil || s.Description == "") {
			c := tools.Schema{}
			if s != nil {
				c = *s
			}
			c.Description = p.Description
			s = &c
		}
		consider(p.Name, p.WireName(), p.In, s)
	}
	return r
}

func sortedNames[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
