package discovery

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// splitWords cuts text into words at anything that is not a letter or a
// digit, and cuts identifiers at their inner boundaries: snake_case,
// kebab-case, camelCase, PascalCase, acronyms ("HTTPServer" → HTTP,
// Server) and letter/digit changes ("v2Items" → v, 2, Items). Case is
// kept; the analyzers lowercase.
func splitWords(s string) []string {
	var out []string
	rs := []rune(s)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, string(rs[start:end]))
		}
		start = -1
	}
	for i, r := range rs {
		if !isWordRune(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := rs[i-1]
		switch {
		case unicode.IsDigit(r) != unicode.IsDigit(prev):
			flush(i)
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush(i) // camelCase
		case unicode.IsUpper(r) && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			flush(i) // the last capital of an acronym starts the next word
		}
		if start < 0 {
			start = i
		}
	}
	flush(len(rs))
	return out
}

// splitIdentifiers rewrites every identifier in text as spaced words, so
// "MAIL_LIST_MESSAGES" and "enableAutoReply" are read as the words they
// are made of.
func splitIdentifiers(text string) string {
	return strings.Join(splitWords(text), " ")
}

// nameWords are the words of a tool name without its toolkit prefix:
// "MAIL_LIST_MESSAGES" in toolkit mail is "LIST MESSAGES". The prefix
// says nothing about what the tool does, and the toolkit is indexed on
// its own.
func nameWords(name string, prefixes ...string) string {
	words := splitWords(name)
	if len(words) > 1 {
		for _, p := range prefixes {
			if p != "" && strings.EqualFold(words[0], strings.Join(splitWords(p), "")) {
				words = words[1:]
				break
			}
		}
	}
	return strings.Join(words, " ")
}

// shorten collapses white space and cuts s to at most n runes at a word
// boundary, ending with "…" when something was cut.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)
	cut := n - 1 // room for the ellipsis
	end := cut
	for end > 0 && rs[end] != ' ' {
		end--
	}
	if end == 0 {
		end = cut // one word longer than n: cut inside it
	}
	head := strings.TrimRightFunc(string(rs[:end]), func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(",;:—–-(", r)
	})
	return head + "…"
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
