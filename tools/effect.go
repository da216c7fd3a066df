package tools

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"
)

// Effect says what calling a tool may do to the data behind it
// (DESIGN.md §5): read it, change it, or destroy it.
type Effect string

const (
	EffectRead        Effect = "read"        // changes nothing
	EffectWrite       Effect = "write"       // creates or changes something
	EffectDestructive Effect = "destructive" // deletes or overwrites something
)

// ParseEffect reads an effect as written in a manifest, a binding or a
// request ("read", "write", "destructive"; case and spaces ignored).
func ParseEffect(s string) (Effect, error) {
	switch e := Effect(strings.ToLower(strings.TrimSpace(s))); e {
	case EffectRead, EffectWrite, EffectDestructive:
		return e, nil
	}
	return "", fmt.Errorf("effect %q must be read, write or destructive", s)
}

// Writes reports whether e may change data (write or destructive).
func (e Effect) Writes() bool { return e == EffectWrite || e == EffectDestructive }

// Marker is the short note put before a tool's description for the
// model: "" for a read, "[writes]" or "[destructive]" otherwise.
func (e Effect) Marker() string {
	switch e {
	case EffectWrite:
		return "[writes]"
	case EffectDestructive:
		return "[destructive]"
	}
	return ""
}

// MethodEffect is the effect an HTTP method implies: GET, HEAD and
// OPTIONS read, DELETE destroys, anything else writes.
func MethodEffect(method string) Effect {
	switch strings.ToUpper(method) {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return EffectRead
	case http.MethodDelete:
		return EffectDestructive
	}
	return EffectWrite
}

// queryWords mark an operation that only queries, whatever its method
// (a POST /search).
var queryWords = []string{"search", "list", "query", "find", "lookup"}

// QueryNamed reports whether the tool's name or operation id says it
// only queries — a search, list or query word leading or ending it
// (search_users, listInvoices, conversations.list) — or a whole path
// segment is one (POST /invoices/search, POST /users.list), or the path
// ends in a reading verb (POST /accounts/get, POST /users.info). A word
// merely inside another (add_member on /lists/{id}/members,
// create_saved_search) does not count: that is a write.
func QueryNamed(t *Tool) bool {
	for _, name := range []string{t.Name, t.OperationID} {
		w := identWords(name)
		if len(w) == 0 || slices.Contains(writeVerbs, w[0]) {
			continue // create_saved_search saves a search
		}
		if isQueryWord(w[0]) || isQueryWord(w[len(w)-1]) {
			return true
		}
	}
	for _, seg := range strings.FieldsFunc(strings.ToLower(t.Path), func(r rune) bool { return r == '/' || r == '.' }) {
		if isQueryWord(seg) {
			return true
		}
	}
	last := strings.ToLower(t.Path[strings.LastIndexAny(t.Path, "/.")+1:])
	switch last {
	case "get", "retrieve", "info", "count":
		return true
	}
	return false
}

// writeVerbs lead the names of operations that change something.
var writeVerbs = []string{"add", "create", "delete", "insert", "remove", "replace", "save", "set", "update", "upsert"}

func isQueryWord(w string) bool { return slices.Contains(queryWords, w) }

// identWords splits an identifier into lower-case words at punctuation
// and camel-case humps (listInvoices → list, invoices).
func identWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	prevLower := false
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && prevLower {
				flush()
			}
			cur = append(cur, r)
			prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		default:
			flush()
			prevLower = false
		}
	}
	flush()
	return words
}

// summaryQueries reports whether an operation's summary starts by saying
// it searches, lists or queries ("List invoices", "Search users").
func summaryQueries(summary string) bool {
	first, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(summary)), " ")
	switch first {
	case "search", "list", "lists", "query", "searches", "queries":
		return true
	}
	return false
}

// DeriveEffect is the effect of t as its source says: the one its source
// gave it (set at import), else its HTTP method's, with a POST named as a
// search, list or query read. A tool with neither method nor effect is a
// write. What trawl acts on is paginate.Effect, which adds what
// pagination detection knows (a POST that pages through a response array
// reads too) and a binding's override.
func DeriveEffect(t *Tool) Effect {
	if t.Effect != "" {
		return t.Effect
	}
	if t.Method == "" {
		return EffectWrite
	}
	e := MethodEffect(t.Method)
	if e == EffectWrite && strings.EqualFold(t.Method, http.MethodPost) && QueryNamed(t) {
		return EffectRead
	}
	return e
}

// importEffect is the effect of an imported operation: its vendor
// extensions' (declared), else DeriveEffect, with a POST whose summary
// says it searches or lists read.
func importEffect(t *Tool, summary string) (Effect, bool) {
	if e, ok := extensionEffect(t.Extensions); ok {
		return e, true
	}
	e := DeriveEffect(t)
	if e == EffectWrite && strings.EqualFold(t.Method, http.MethodPost) && summaryQueries(summary) {
		e = EffectRead
	}
	return e, false
}

// extensionEffect is the effect an operation's vendor extensions declare:
// x-trawl-effect, x-effect (read|write|destructive); x-readonly,
// x-read-only, x-readOnly (true: read); x-destructive (true: destructive,
// false: write). ok is false when none is present or readable.
func extensionEffect(ext map[string]any) (Effect, bool) {
	for _, k := range []string{"x-trawl-effect", "x-effect"} {
		if s, ok := ext[k].(string); ok {
			if e, err := ParseEffect(s); err == nil {
				return e, true
			}
		}
	}
	for _, k := range []string{"x-readonly", "x-read-only", "x-readOnly"} {
		if b, ok := boolExt(ext[k]); ok && b {
			return EffectRead, true
		}
	}
	if b, ok := boolExt(ext["x-destructive"]); ok {
		if b {
			return EffectDestructive, true
		}
		return EffectWrite, true
	}
	return "", false
}

func boolExt(v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "true", "yes":
			return true, true
		case "false", "no":
			return false, true
		}
	}
	return false, false
}

// mcpEffect reads MCP tool annotations as the MCP specification defines
// them: readOnlyHint defaults to false and destructiveHint to true (it
// only counts when the tool is not read-only). So a tool without
// annotations is destructive.
func mcpEffect(readOnly bool, destructive *bool) Effect {
	if readOnly {
		return EffectRead
	}
	if destructive != nil && !*destructive {
		return EffectWrite
	}
	return EffectDestructive
}
