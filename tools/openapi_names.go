package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

var invalidNameRun = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// baseName is an operation's tool name before uniqueness is settled: the
// operationId sanitised to [a-zA-Z0-9_-], or method and path when there
// is none (get_repos_owner_repo_issues). exact reports that the name is
// the operationId unchanged.
func baseName(method, path, operationID string) (name string, exact bool) {
	if n := strings.Trim(invalidNameRun.ReplaceAllString(operationID, "_"), "_-"); n != "" {
		return fitName(n), n == operationID && len(n) <= 64
	}
	p := strings.NewReplacer("{", "", "}", "").Replace(path)
	p = strings.Trim(invalidNameRun.ReplaceAllString(p, "_"), "_-")
	if p == "" {
		p = "root"
	}
	return fitName(strings.ToLower(method) + "_" + p), false
}

// fitName shortens a name over 64 characters to 57 and a hash of the
// whole, so that two long names sharing a prefix stay apart.
func fitName(n string) string {
	if len(n) <= 64 {
		return n
	}
	return n[:57] + "_" + shortHash(n)
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:3])
}

// assignNames makes names unique within the provider. Of operations that
// share a name, the one whose operationId is the name unchanged (else the
// first by path and method) keeps it; the others get a suffix hashed from
// their method and path, which stays the same when operations are added
// to or removed from the document.
func assignNames(ops []*operation) {
	groups := map[string][]*operation{}
	for _, o := range ops {
		groups[o.name] = append(groups[o.name], o)
	}
	taken := map[string]bool{}
	var rest []*operation
	for _, o := range ops {
		g := groups[o.name]
		keeper := g[0]
		for _, c := range g {
			if c.exact {
				keeper = c
				break
			}
		}
		if o == keeper {
			taken[o.name] = true
		} else {
			rest = append(rest, o)
		}
	}
	for _, o := range rest {
		base := o.name
		if len(base) > 57 {
			base = base[:57]
		}
		key := o.method + " " + o.path
		for i := 1; ; i++ {
			n := base + "_" + shortHash(key)
			if !taken[n] {
				o.name = n
				taken[n] = true
				break
			}
			key = fmt.Sprintf("%s %s #%d", o.method, o.path, i)
		}
	}
}

var (
	invalidParamRun = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)
	comparisons     = strings.NewReplacer("<=", "_lte", ">=", "_gte", "<", "_lt", ">", "_gt")
)

// paramName is the argument name the model sees for a wire name: letters,
// digits, '_', '.' and '-' (what model APIs accept as property keys), at
// most 64 characters, and never starting with '_' (reserved arguments do).
// Comparison suffixes read as words (Twilio's DateCreated< becomes
// DateCreated_lt); brackets become underscores (page[size] is page_size).
func paramName(wire string) string {
	n := strings.TrimSuffix(wire, "[]")
	n = comparisons.Replace(n)
	n = strings.Trim(invalidParamRun.ReplaceAllString(n, "_"), "_.-")
	if n == "" {
		n = "param"
	}
	if len(n) > 64 {
		n = n[:57] + "_" + shortHash(wire)
	}
	return n
}

// wireName is the Param.Wire value for an argument named name.
func wireName(name, wire string) string {
	if name == wire {
		return ""
	}
	return wire
}

// uniqueName returns name, or name with its location appended (then a
// counter) when another parameter already uses it, and records it.
func uniqueName(taken map[string]bool, name, in string) string {
	n := name
	for i := 1; taken[n]; i++ {
		n = name + "_" + in
		if i > 1 {
			n = fmt.Sprintf("%s_%s%d", name, in, i)
		}
	}
	taken[n] = true
	return n
}

// describeOperation joins summary and description into one text for a
// model, capped at maxToolDescription.
func describeOperation(summary, description string) string {
	s, d := cleanText(summary), cleanText(description)
	var out string
	switch {
	case s == "":
		out = d
	case d == "":
		out = s
	case strings.HasPrefix(strings.ToLower(d), strings.ToLower(strings.TrimRight(s, "."))):
		out = d
	default:
		if !strings.ContainsAny(s[len(s)-1:], ".!?:") {
			s += "."
		}
		out = s + " " + d
	}
	return trimText(out, maxToolDescription)
}
