package main

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Terminal styles (SGR).
const (
	sgrBold     = "\033[1m"
	sgrBoldOff  = "\033[22m"
	sgrCode     = "\033[36m"
	sgrCodeOff  = "\033[39m"
	sgrDim      = "\033[2m"
	sgrStyleOff = "\033[0m"
)

// mdTerm renders Markdown for a terminal as it streams in: **bold** and
// __bold__ in bold, `code` in colour, # headings in bold, list markers as
// bullets, and tables laid out in aligned columns that fit the width (a
// table is held until its last row arrives), and lines wrapped at word
// boundaries to the width. Everything else passes as it comes, a word at
// a time, so text still streams.
type mdTerm struct {
	width func() int // the terminal's width

	head    string   // the start of a line, until its kind is known
	decided bool     // the current line's kind is known
	table   []string // the rows of the table being received
	inRow   bool     // the current line is a table row
	row     string
	heading bool
	bold    bool
	code    bool
	star    byte // a held '*' or '_' that may open or close bold

	word    strings.Builder // the word being received, styles included
	wordLen int             // its visible runes
	spaces  int             // spaces received after the last word, not printed yet
	col     int             // visible runes on the terminal's line so far
	indent  int             // a list item's continuation indent
}

var (
	// mdMarker is a line start that may still become a block marker.
	mdMarker = regexp.MustCompile(`^(\s{0,3}(#{1,6}|[-*+]|\d{1,3}[.)])?|\s{0,3}\|.*)$`)
	mdList   = regexp.MustCompile(`^(\s{0,3})[-*+] `)
	mdHead   = regexp.MustCompile(`^\s{0,3}#{1,6} `)
	mdRule   = regexp.MustCompile(`^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$`)
)

// write renders s, a piece of the text, and returns what to print.
func (m *mdTerm) write(s string) string {
	var out strings.Builder
	for _, r := range s {
		m.rune(&out, r)
	}
	return out.String()
}

func (m *mdTerm) rune(out *strings.Builder, r rune) {
	if r == '\n' {
		m.endLine(out)
		return
	}
	if m.inRow {
		m.row += string(r)
		return
	}
	if !m.decided {
		m.head += string(r)
		if mdMarker.MatchString(m.head) && !strings.HasSuffix(m.head, " ") && !strings.HasPrefix(strings.TrimLeft(m.head, " "), "|") {
			return // "##", "-", "12": still a possible marker
		}
		m.decide(out)
		return
	}
	m.inline(out, r)
}

// decide settles the kind of the line whose start is m.head.
func (m *mdTerm) decide(out *strings.Builder) {
	m.decided = true
	head := m.head
	m.head = ""
	if strings.HasPrefix(strings.TrimLeft(head, " "), "|") {
		m.inRow, m.row = true, head
		return
	}
	m.flushTable(out)
	switch {
	case mdHead.MatchString(head):
		m.heading = true
		out.WriteString(sgrBold)
		return
	case mdList.MatchString(head):
		lead := mdList.FindStringSubmatch(head)[1]
		out.WriteString(lead + "• ")
		m.col = utf8.RuneCountInString(lead) + 2
		m.indent = m.col
		return
	}
	for _, r := range head {
		m.inline(out, r)
	}
}

// inline handles bold and code within a line.
func (m *mdTerm) inline(out *strings.Builder, r rune) {
	if m.star != 0 {
		held := m.star
		m.star = 0
		if r == rune(held) && !m.code {
			m.bold = !m.bold
			if m.bold {
				m.word.WriteString(sgrBold)
			} else if !m.heading {
				m.word.WriteString(sgrBoldOff)
			}
			return
		}
		m.visible(out, rune(held))
	}
	switch {
	case (r == '*' || r == '_') && !m.code:
		m.star = byte(r)
	case r == '`':
		m.code = !m.code
		if m.code {
			m.word.WriteString(sgrCode)
		} else {
			m.word.WriteString(sgrCodeOff)
		}
	default:
		m.visible(out, r)
	}
}

// visible adds a printed rune: a space ends the word, and waits to be
// printed before the next word if that fits on this line (else the next
// word starts the next line); anything else joins the word.
func (m *mdTerm) visible(out *strings.Builder, r rune) {
	if r != ' ' {
		m.word.WriteRune(r)
		m.wordLen++
		return
	}
	m.flushWord(out)
	m.spaces++
}

// flushWord prints the spaces held and the word received, or a line
// break instead of the spaces when the word would not fit.
func (m *mdTerm) flushWord(out *strings.Builder) {
	if m.word.Len() == 0 {
		return
	}
	if w := m.width(); w > 0 && m.col > m.indent && m.col+m.spaces+m.wordLen > w {
		out.WriteString("\n" + strings.Repeat(" ", m.indent))
		m.col = m.indent
	} else {
		out.WriteString(strings.Repeat(" ", m.spaces))
		m.col += m.spaces
	}
	m.spaces = 0
	out.WriteString(m.word.String())
	m.col += m.wordLen
	m.word.Reset()
	m.wordLen = 0
}

// endLine ends the current line: a table row is kept for the table, any
// other line is closed (its styles reset).
func (m *mdTerm) endLine(out *strings.Builder) {
	if !m.decided && m.head != "" {
		m.decide(out)
	}
	if m.inRow {
		m.table = append(m.table, m.row)
		m.row, m.inRow, m.decided = "", false, false
		return
	}
	if !m.decided && len(m.table) > 0 {
		m.flushTable(out) // a blank line ends the table
	}
	m.closeLine(out)
	out.WriteString("\n")
}

// closeLine ends the styles a line opened.
func (m *mdTerm) closeLine(out *strings.Builder) {
	if m.star != 0 {
		m.visible(out, rune(m.star))
		m.star = 0
	}
	m.flushWord(out)
	m.col, m.indent, m.spaces = 0, 0, 0
	if m.bold || m.heading || m.code {
		out.WriteString(sgrStyleOff)
	}
	m.bold, m.heading, m.code, m.decided = false, false, false, false
}

// flush ends the text: what is held is rendered.
func (m *mdTerm) flush() string {
	var out strings.Builder
	if m.inRow {
		m.table = append(m.table, m.row)
		m.row, m.inRow = "", false
	} else if !m.decided && m.head != "" {
		m.decide(&out)
		if m.inRow {
			m.table = append(m.table, m.row)
			m.row, m.inRow = "", false
		}
	}
	m.flushTable(&out)
	if m.decided || m.star != 0 || m.bold || m.code {
		m.closeLine(&out)
	}
	return out.String()
}

// flushTable prints the table held, its columns aligned and fitted to the
// terminal's width (cells cut with "…"), the header in bold.
func (m *mdTerm) flushTable(out *strings.Builder) {
	if len(m.table) == 0 {
		return
	}
	var rows [][]string
	for _, line := range m.table {
		if mdRule.MatchString(line) {
			continue
		}
		t := strings.TrimSpace(line)
		t = strings.TrimSuffix(strings.TrimPrefix(t, "|"), "|")
		var cells []string
		for _, c := range strings.Split(t, "|") {
			cells = append(cells, stripInline(strings.TrimSpace(c)))
		}
		rows = append(rows, cells)
	}
	m.table = nil
	if len(rows) == 0 {
		return
	}
	var b strings.Builder
	tb := &table{header: rows[0], rows: rows[1:]}
	_ = tb.write(&b, m.width())
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i, l := range lines {
		if i == 0 {
			out.WriteString(sgrBold + l + sgrBoldOff + "\n")
			out.WriteString(sgrDim + strings.Repeat("─", utf8.RuneCountInString(l)) + sgrStyleOff + "\n")
			continue
		}
		out.WriteString(l + "\n")
	}
}

// stripInline drops the emphasis marks of a table cell (its columns are
// measured, so they hold plain text).
func stripInline(s string) string {
	return strings.NewReplacer("**", "", "__", "", "`", "").Replace(s)
}
